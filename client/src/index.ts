/**
 * `@workspace-operations/client`: the typed client of the Workspace Operations API, compiled from
 * the generated client and types (`generated/`, written only by `npm run generate`). Exports that
 * belong next to the client (not generated) go here too: the receiver-side webhook verification
 * (`webhooks.ts`, server-side, uses `node:crypto`; also `@workspace-operations/client/webhooks`).
 * `browser.ts` is this entry without it, chosen by bundlers through the `browser` export condition.
 */
export * from '../../generated/client.ts';
export * from './webhooks.ts';
