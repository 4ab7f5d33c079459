/** `npm run demo`: a demo workspace with a sales pipeline, and the calls to try it. */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { openDatabase } from '../db/database.ts';
import { createClient } from '../generated/client.ts';
import { applyWorkspace } from '../server/admin.ts';
import { systemClock } from '../server/clock.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const db = openDatabase();
await db.migrate();
const spec = YAML.parse(fs.readFileSync(path.join(here, 'demo-workspace.yaml'), 'utf8'));
const result = await applyWorkspace(db, systemClock, spec);
await db.close();
const secret = result.keys.ci!.secret;
const base = process.env.BASE_URL ?? `http://localhost:${process.env.PORT ?? 8080}/v1`;

// If the service is running, create a first pipeline through the generated client.
const client = createClient({ baseUrl: base, apiKey: secret });
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

console.log(JSON.stringify(result, null, 2));
console.log(`
Demo workspace "${spec.workspace.name}" created. The key secret above is shown only once.
${created?.data ? `Created pipeline ${created.data.item.id} through the generated client.` : `(Start the service with \`npm start\` to call it.)`}

Try it:
  curl -s -X POST ${base}/operations/customers.ListSalesPipelines \\
    -H 'Authorization: Bearer ${secret}' -H 'Content-Type: application/json' -d '{}'

  curl -s -X POST ${base}/operations/customers.UpdateSalesPipeline \\
    -H 'Authorization: Bearer ${secret}' -H 'Content-Type: application/json' \\
    -H "Idempotency-Key: $(uuidgen 2>/dev/null || date +%s%N)" \\
    -d '{"id":"<pipeline id>","data":{"name":"New business (EMEA)"},"expected":{"name":"New business"}}'

Collect traffic: paste the tag into every page of a site (its publishable collect key can only send events):
${Object.entries(result.collect_keys)
  .map(([h, key]) => `  ${spec.bundles[h].domain}:\n    <script defer src="${base}/track.js" data-key="${key}"></script>`)
  .join('\n')}

  or send one event by hand:
  curl -s -i -X POST ${base}/track -H 'Content-Type: text/plain' \\
    -H 'User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0' \\
    -d '{"key":"${Object.values(result.collect_keys)[0] ?? 'pk_...'}","type":"pageview","url":"https://${Object.values<{ domain: string }>(spec.bundles ?? {})[0]?.domain ?? 'example.com'}/pricing?utm_source=demo"}'
`);
