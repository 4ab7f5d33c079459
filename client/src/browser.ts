/**
 * The package's main entry for browser bundles (the `browser` export condition): the generated client
 * only, without the webhook verification helpers, so nothing here loads `node:crypto`. Server-side
 * code bundled with that condition imports them from `@workspace-operations/client/webhooks`.
 */
export * from '../../generated/client.ts';
