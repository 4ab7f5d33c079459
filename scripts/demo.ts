/**
 * `npm run demo`: a demo workspace with a sales pipeline, a few companies and deals, five sites holding
 * 90 days of generated traffic (DEMO_EVENTS events, default 1,000,000, ending now; 0 for none), and
 * the calls to try it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import cliProgress from 'cli-progress';
import YAML from 'yaml';
import { openDatabase } from '../db/database.ts';
import { type Access, namespaces, resourceTypes } from '../generated/catalogue.ts';
import { createClient, type RequestBody } from '../generated/client.ts';
import { trackerTag } from '../handlers/analytics/admin.ts';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { createService, migrations } from '../app.ts';
import { applyWorkspace } from '../server/admin.ts';
import { loadConfig } from '../server/config.ts';
import { createSigninLink } from '../server/signin.ts';
import { systemClock } from '../server/clock.ts';
import { bulkLoadEvents } from '../handlers/analytics/bulk.ts';
import { normalizeEvent } from '../handlers/analytics/ingest.ts';
import { demoSigning } from './demo-signing.ts';
import { demoTraffic } from './demo-traffic.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const again = process.argv.includes('--again');
const db = openDatabase();
await db.migrate(migrations);
const spec = YAML.parse(fs.readFileSync(path.join(here, 'demo-workspace.yaml'), 'utf8'));
// The demo key may call all the document offers: derived from the catalogue, so a new namespace or type needs no edit here.
spec.keys.ci = { ...spec.keys.ci, ...demoGrants() };
// One demo workspace is enough: a second one doubles the sites on the dashboard and confuses the counts.
const earlier = await db.sql.all<{ id: string }>('SELECT id FROM workspaces WHERE name = ? ORDER BY created_at', [spec.workspace.name]);
if (earlier.length && !again) {
  console.error(
    `A demo workspace "${spec.workspace.name}" exists already (${earlier.map((w) => w.id).join(', ')}); nothing was created.\n` +
      `  See it with: npm run admin -- workspace list   (keys: npm run admin -- key list --workspace ${earlier[0]!.id})\n` +
      `  A new key for it: npm run admin -- key replace --id <key id>\n` +
      `  Or create another one anyway: npm run demo -- --again`,
  );
  await db.close();
  process.exit(1);
}
// Five sites for the analytics demo: the file's own, then more up to five.
const extraSites: Record<string, { name: string; domain: string }> = {
  blog: { name: 'Blog', domain: 'blog.acme.test' },
  app: { name: 'Web app', domain: 'app.acme.test' },
  status: { name: 'Status page', domain: 'status.acme.test' },
  help: { name: 'Help center', domain: 'help.acme.test' },
  careers: { name: 'Careers', domain: 'careers.acme.test' },
};
spec.bundles ??= {};
for (const [handle, site] of Object.entries(extraSites)) if (Object.keys(spec.bundles).length < 5 && !spec.bundles[handle]) spec.bundles[handle] = site;
const result = await applyWorkspace(db, systemClock, spec);
await loadDemoTraffic(Object.values(result.bundles));

/** Every namespace (`<namespace>.*`), read and write on every resource type. */
function demoGrants(): { operations: string[]; resources: Record<string, Access[]> } {
  return { operations: namespaces.map((n) => `${n}.*`), resources: Object.fromEntries(resourceTypes.map((t) => [t, ['read', 'write'] as Access[]])) };
}

/** 90 days of traffic over the sites (the first the busiest), bulk loaded with a progress bar. */
async function loadDemoTraffic(bundleIds: string[]): Promise<void> {
  const total = Number(process.env.DEMO_EVENTS ?? 1_000_000);
  if (!Number.isInteger(total) || total < 0) throw new Error(`DEMO_EVENTS must be a whole number (got ${process.env.DEMO_EVENTS})`);
  if (total === 0 || !bundleIds.length) return;
  const started = Date.now();
  const traffic = demoTraffic({ sites: bundleIds.length, totalEvents: total, end: started });
  const bar = process.stderr.isTTY
    ? new cliProgress.SingleBar({ format: 'demo traffic [{bar}] {percentage}% | {site} {phase} | {duration}s', stream: process.stderr }, cliProgress.Presets.shades_classic)
    : null;
  bar?.start(total * 2, 0, { site: '', phase: '' });
  let done = 0;
  for (let i = 0; i < bundleIds.length; i++) {
    const events = traffic[i]!.map((e) => normalizeEvent(bundleIds[i]!, e));
    traffic[i] = [];
    await bulkLoadEvents(db, bundleIds[i]!, events, {
      onProgress: (n, _t, phase) => bar?.update(done + (phase === 'store' ? n : events.length + n), { site: `site ${i + 1}/${bundleIds.length}`, phase }),
    });
    done += 2 * events.length;
  }
  bar?.stop();
  console.error(`Loaded ${total.toLocaleString('en')} events of demo traffic into ${bundleIds.length} sites in ${((Date.now() - started) / 1000).toFixed(1)} s.`);
}
const secret = result.keys.ci!.secret;
const base = process.env.BASE_URL ?? `http://localhost:${process.env.PORT ?? 8080}/v1`;

// The demo records are made through the generated client against this process's own instance of the
// service (on a free loopback port), so they exist, and the calls below carry real ids, whether or
// not the server is running yet.
const local = createService({ db, clock: systemClock, config: { ...loadConfig(), validateResponses: true, env: { ...process.env, COLLECT_FLUSH_INTERVAL_MS: '0' } }, logger: pino({ level: 'silent' }) });
const localServer = http.createServer(local.handler);
await new Promise<void>((resolve) => localServer.listen(0, '127.0.0.1', resolve));
const client = createClient({ baseUrl: `http://127.0.0.1:${(localServer.address() as AddressInfo).port}/v1`, apiKey: secret });
const created = await client.customers
  .CreateSalesPipeline({
    data: {
      name: 'New business',
      is_default: true,
      stages: [
        { id: 'lead', label: 'Lead', kind: 'open', probability: 10, tone: 'gray' },
        { id: 'proposal', label: 'Proposal sent', kind: 'open', probability: 60, tone: 'blue' },
        { id: 'won', label: 'Closed won', kind: 'won', probability: 100, tone: 'accent' },
        { id: 'lost', label: 'Closed lost', kind: 'lost', probability: 0, tone: 'warn' },
      ],
    },
  })
  .catch(() => null);
const records = created?.data
  ? await demoRecords(created.data.item.id).catch((err: Error) => {
      console.error(`Could not create the demo companies and deals: ${err.message}`);
      return null;
    })
  : null;

/** A few companies (upserted by domain) and deals in the new pipeline, through the generated client. */
async function demoRecords(pipelineId: string) {
  const companies: Array<RequestBody<'customers.UpsertCompany'>['data']> = [
    { name: 'Globex Corporation', domain: 'https://www.globex.com/', industry: 'Manufacturing', employee_count: 250, annual_revenue: { amount: '12500000', currency: 'USD' }, lifecycle_stage: 'customer', address: { city: 'Springfield', country: 'US' } },
    { name: 'Initech', domain: 'initech.com', industry: 'Software', employee_count: null, lifecycle_stage: 'prospect' },
    { name: 'Umbrella Nordic AB', domain: 'umbrella.se', industry: 'Pharmaceuticals', annual_revenue: { amount: '48000000', currency: 'SEK' }, lifecycle_stage: 'lead', address: { city: 'Malmö', country: 'SE' } },
  ];
  const ids: string[] = [];
  for (const data of companies) {
    const { data: res, error } = await client.customers.UpsertCompany({ data });
    if (error) throw new Error(`demo company ${data.name}: ${error.message}`);
    ids.push(res.item.id);
  }
  const deals: Array<RequestBody<'customers.CreateDeal'>['data']> = [
    { name: 'Globex fleet renewal 2027', pipeline_id: pipelineId, stage_id: 'proposal', company_id: ids[0]!, amount: { amount: '48000', currency: 'USD' }, close_date: '2027-03-31' },
    { name: 'Globex spare parts', pipeline_id: pipelineId, stage_id: 'won', company_id: ids[0]!, amount: { amount: '7250.50', currency: 'USD' } },
    { name: 'Initech pilot', pipeline_id: pipelineId, stage_id: 'lead', company_id: ids[1]!, amount: { amount: '15000', currency: 'EUR' }, close_date: '2027-01-15' },
    { name: 'Umbrella Nordic framework', pipeline_id: pipelineId, stage_id: 'proposal', company_id: ids[2]!, amount: { amount: '1200000', currency: 'SEK' } },
  ];
  const dealIds: string[] = [];
  for (const data of deals) {
    const { data: res, error } = await client.customers.CreateDeal({ data });
    if (error) throw new Error(`demo deal ${data.name}: ${error.message}`);
    dealIds.push(res.item.id);
  }
  return { companies: ids, deals: dealIds };
}

// A sample contract uploaded through the documents operations and a pending signing request over it.
const signing = await demoSigning(client, `http://127.0.0.1:${(localServer.address() as AddressInfo).port}`).catch((err: Error) => {
  console.error(`Could not create the demo signing request: ${err.message}`);
  return null;
});

await new Promise((resolve) => localServer.close(resolve));
await local.closeEndpoints();
const owner = Object.entries(spec.members ?? {}).find(([, m]) => (m as { role: string }).role === 'owner')?.[0];
const origin = new URL(base).origin + new URL(base).pathname.replace(/\/v1\/?$/, '');
const signin = owner
  ? await createSigninLink(db, systemClock, { workspaceId: result.workspace_id, memberId: result.members[owner]!, next: `/dashboard?site=${Object.values(result.bundles)[0]}`, baseUrl: origin })
  : null;
await db.close();

console.log(JSON.stringify(result, null, 2));
console.log(`
Demo workspace "${spec.workspace.name}" created. The key secret above is shown only once.
${created?.data ? `Created pipeline ${created.data.item.id}, ${records?.companies.length ?? 0} companies and ${records?.deals.length ?? 0} deals through the generated client.` : `Could not create the demo pipeline: ${JSON.stringify(created?.error ?? null)}`}
Start the service with \`npm start\` (base URL ${base}; set BASE_URL or PORT when it differs), then:
${signin ? `\nDashboard: open this one-time sign-in link within 15 minutes (as ${spec.members[owner!].name}):\n  ${signin.url}\n  a new one: npm run admin -- signin-link --workspace ${result.workspace_id} --member ${signin.member_id} --base-url ${origin}\n` : ''}
API reference: ${origin}/docs

Try it:
  curl -s -X POST ${base}/operations/customers.ListSalesPipelines \\
    -H 'Authorization: Bearer ${secret}' -H 'Content-Type: application/json' -d '{}'

  curl -s -X POST ${base}/operations/customers.UpdateSalesPipeline \\
    -H 'Authorization: Bearer ${secret}' -H 'Content-Type: application/json' \\
    -H "Idempotency-Key: $(uuidgen 2>/dev/null || date +%s%N)" \\
    -d '{"id":"${created?.data?.item.id ?? '<pipeline id>'}","data":{"name":"New business (EMEA)"},"expected":{"name":"New business"}}'

  curl -s -X POST ${base}/operations/customers.ListDeals \\
    -H 'Authorization: Bearer ${secret}' -H 'Content-Type: application/json' -d '{"limit":10}'

  # win a deal, only if it is still at the proposal stage (409 conflict otherwise)
  curl -s -X POST ${base}/operations/customers.UpdateDeal \\
    -H 'Authorization: Bearer ${secret}' -H 'Content-Type: application/json' \\
    -H "Idempotency-Key: $(uuidgen 2>/dev/null || date +%s%N)" \\
    -d '{"id":"${records?.deals[0] ?? '<deal id>'}","data":{"stage_id":"won"},"expected":{"stage_id":"proposal"}}'

  # create or update a company by its domain (any form of it)
  curl -s -X POST ${base}/operations/customers.UpsertCompany \\
    -H 'Authorization: Bearer ${secret}' -H 'Content-Type: application/json' \\
    -H "Idempotency-Key: $(uuidgen 2>/dev/null || date +%s%N)" \\
    -d '{"data":{"domain":"WWW.Initech.com","employee_count":120,"lifecycle_stage":"customer"}}'

${
  signing
    ? `Signing: file ${signing.fileId} (a two-page sample contract) is out for signature as request ${signing.requestId}; the
invitation to ${signing.signer} is ${process.env.SMTP_URL ? 'sent through SMTP_URL' : 'in the development mailbox (npm run admin -- mail list, then mail show --id ml_... for its link)'}:
  curl -s -X POST ${base}/operations/signing.GetSigningRequest \\
    -H 'Authorization: Bearer ${secret}' -H 'Content-Type: application/json' -d '{"signing_request_id":"${signing.requestId}"}'

  curl -s -X POST ${base}/operations/signing.ListSigningEvents \\
    -H 'Authorization: Bearer ${secret}' -H 'Content-Type: application/json' -d '{"signing_request_id":"${signing.requestId}"}'

`
    : ''
}Collect traffic: paste the tag into every page of a site (its publishable collect key can only send events):
${Object.entries(result.collect_keys)
  .map(([h, key]) => `  ${spec.bundles[h].domain}:\n    ${trackerTag(base, key)}`)
  .join('\n')}

  or send one event by hand:
  curl -s -i -X POST ${base}/track -H 'Content-Type: text/plain' \\
    -H 'User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0' \\
    -d '{"key":"${Object.values(result.collect_keys)[0] ?? 'pk_...'}","type":"pageview","url":"https://${Object.values<{ domain: string }>(spec.bundles ?? {})[0]?.domain ?? 'example.com'}/pricing?utm_source=demo"}'
`);
