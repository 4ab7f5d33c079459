/**
 * The rules a list of fields meets, the same for a request (`RequestFileSignatures.fields`, its
 * `signer` an index) and a template (`CreateTemplate.fields`, its `role` a name): standard signatures
 * only, pages within the document, `required` meaningful only for the kinds a signer fills, and
 * fields found from the document's text tags (textTags.ts) naming only signers there are, at most
 * MAX_FIELDS of them. (`required` as stored: queries.ts `storedRequired`.)
 */
import { invalidInput } from '../../../server/errors.ts';
import type { TextTag } from '../../interfaces/documentFiles.ts';
import { fieldsOfTags, type TaggedField } from './textTags.ts';

/** Fields a request or template takes (the schemas' `maxItems` of `fields`), also from text tags. */
export const MAX_FIELDS = 50;

/** Fields only with a standard signature (a BankID signature leaves the provider's PDF unmodified). */
export function checkFieldsMethod(count: number, method: string | undefined): void {
  if (count && (method ?? 'standard') !== 'standard') throw invalidInput('fields: only a standard signature draws fields on the pages; a BankID signature leaves the provider\'s PDF unmodified.');
}

/** Every field on one of the document's pages. */
export function checkFieldPages(fields: ReadonlyArray<{ page: number }>, pageCount: number): void {
  const tooFar = fields.findIndex((f) => f.page > pageCount);
  if (tooFar >= 0) throw invalidInput(`fields[${tooFar}].page is ${fields[tooFar]!.page}, but the document has ${pageCount} page${pageCount === 1 ? '' : 's'}.`);
}

/**
 * The fields of the document's text tags when no `fields` were given (and the signature is standard;
 * `fields: []` ignores the tags), each naming one of `slots` signers. `what` names the slots in a
 * refusal: "the request has 2 signers", "the template has 2 signing roles".
 */
export function fieldsFromTags(tags: readonly TextTag[] | undefined, given: boolean, method: string | undefined, slots: number, what: { owner: string; slot: string }): TaggedField[] {
  if (given || (method ?? 'standard') !== 'standard') return [];
  const tagged = fieldsOfTags(tags);
  if (tagged.length > MAX_FIELDS) {
    throw invalidInput(`The document has ${tagged.length} field tags, more than the ${MAX_FIELDS} fields a ${what.owner} takes; send fields instead (an empty list ignores the tags).`);
  }
  const stray = tagged.find((f) => f.signer >= slots);
  if (stray) {
    throw invalidInput(
      `The document's text tag ${stray.tag} on page ${stray.page} names signer ${stray.signer + 1}, but the ${what.owner} has ${slots} ${what.slot}${slots === 1 ? '' : 's'}: add one, or send fields (an empty list ignores the document's tags).`,
    );
  }
  return tagged;
}
