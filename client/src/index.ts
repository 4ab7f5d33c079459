/**
 * `@workspace-operations/client`: the typed client of the Workspace Operations API, compiled from
 * the generated client and types (`generated/`, written only by `npm run generate`). Exports that
 * belong next to the client (not generated) go here too.
 */
export * from '../../generated/client.ts';
