'use strict';
/**
 * The one rule for text a person reads as a name, title, label, message or file name (the document's
 * `format: display-text`, enforced by server/ajv.cjs, and the page forms' names and addresses): no
 * bidirectional embedding, override or isolate controls. An override (`invoice[U+202E]fdp.exe` shows as
 * `invoiceexe.pdf`) or an unclosed embedding makes the text, and every sentence it is shown in, read
 * differently from what it is. Right-to-left letters (Hebrew, Arabic) are not controls and stay
 * allowed; so do the marks U+200E LEFT-TO-RIGHT MARK, U+200F RIGHT-TO-LEFT MARK and U+061C ARABIC
 * LETTER MARK: they are invisible strong letters that set the direction of the neutral characters
 * beside them (`(` or `.`) without opening a run that reorders the rest, and real right-to-left names
 * need them. CommonJS, so that the Dredd hooks (CommonJS) require the same file (types in text.d.cts).
 */

/** The refused controls and their Unicode names. */
const BIDI_CONTROL_NAMES = {
  0x202a: 'LEFT-TO-RIGHT EMBEDDING',
  0x202b: 'RIGHT-TO-LEFT EMBEDDING',
  0x202c: 'POP DIRECTIONAL FORMATTING',
  0x202d: 'LEFT-TO-RIGHT OVERRIDE',
  0x202e: 'RIGHT-TO-LEFT OVERRIDE',
  0x2066: 'LEFT-TO-RIGHT ISOLATE',
  0x2067: 'RIGHT-TO-LEFT ISOLATE',
  0x2068: 'FIRST STRONG ISOLATE',
  0x2069: 'POP DIRECTIONAL ISOLATE',
};

const BIDI_CONTROLS = /[\u202A-\u202E\u2066-\u2069]/u;

/** The OpenAPI `format` of a string a person reads. */
const DISPLAY_TEXT_FORMAT = 'display-text';

/** The same rule as a JSON Schema `pattern`, for schemas read by validators that do not know the format (MCP tool inputs). */
const DISPLAY_TEXT_PATTERN = '^[^\\u202A-\\u202E\\u2066-\\u2069]*$';

/** @param {string} value */
const isDisplayText = (value) => !BIDI_CONTROLS.test(value);

/**
 * The first refused control of `value` as `U+202E RIGHT-TO-LEFT OVERRIDE`, or null.
 * @param {string} value
 * @returns {string | null}
 */
function bidiControlIn(value) {
  const found = BIDI_CONTROLS.exec(value);
  if (!found) return null;
  const code = found[0].codePointAt(0);
  return `U+${code.toString(16).toUpperCase()} ${BIDI_CONTROL_NAMES[code]}`;
}

/**
 * The API's refusal of a value that breaks the rule, or null.
 * @param {string} where e.g. `body.title`
 * @param {string} value
 * @returns {string | null}
 */
function displayTextProblem(where, value) {
  const control = bidiControlIn(value);
  if (control === null) return null;
  return `${where} contains ${control}, a control that reorders text; names, titles, messages and file names may not contain bidi controls (U+202A–U+202E, U+2066–U+2069; right-to-left letters and the marks U+200E, U+200F are fine)`;
}

/**
 * The same rule on a page form, worded for the person typing, or null.
 * @param {string} what e.g. `name`
 * @param {string} value
 * @returns {string | null}
 */
function bidiControlProblem(what, value) {
  const control = bidiControlIn(value);
  if (control === null) return null;
  return `The ${what} contains ${control.split(' ')[0]}, a character that changes the direction of the text around it (right-to-left override, embedding or isolate, U+202A–U+202E and U+2066–U+2069): type it without.`;
}

module.exports = { BIDI_CONTROLS, DISPLAY_TEXT_FORMAT, DISPLAY_TEXT_PATTERN, isDisplayText, bidiControlIn, displayTextProblem, bidiControlProblem };
