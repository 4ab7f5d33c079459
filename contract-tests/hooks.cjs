'use strict';
/**
 * Dredd hooks for `npm run contract` (contract-tests/run.ts). They run inside Dredd's own node
 * process, as CommonJS (the package is "type": "module", hence .cjs).
 *
 * For every transaction (one per operation and documented status) the hooks:
 *  - make that status actually happen, from the scenario table of the operation's namespace
 *    (contract-tests/scenarios/<namespace>.cjs: real records and ids for 200, an unknown id for 404,
 *    a mismatching `expected` or a record in use for 409, ...) or, for the statuses every operation
 *    shares, here: an unknown field for 400, an unknown key for 401, a key without grants for 403, a
 *    key whose rate budget was just used up for 429; 500 is skipped;
 *  - give every command a fresh Idempotency-Key;
 *  - set `expected.bodySchema` to the real response schema from the dereferenced document
 *    (generated/openapi.dereferenced.json, from the same `npm run generate` as the bundled document
 *    Dredd reads) translated to JSON Schema (server/ajv.cjs), so bodies are checked with
 *    additionalProperties, nullable, bounds and enums (Dredd 14's OpenAPI 3 parser drops all of those);
 *  - check the documented response headers (Content-Type, Retry-After, Idempotency-Replayed) against
 *    their schemas;
 *  - remember every record a transaction or a scenario's setup created and delete it again at the
 *    end, whatever its type (the delete operation of its resource type, from the document).
 * A transaction the hooks have no scenario for fails (it is never skipped silently); every skip
 * prints its reason.
 *
 * Input: the JSON file named by CONTRACT_CONTEXT (written by run.ts): base URL, key secrets, member
 * ids. Secrets are never printed; Authorization headers and cookies are masked in Dredd's output.
 */
const hooks = require('hooks');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { createAjv, toJsonSchema } = require('../server/ajv.cjs');

const say = (message) => console.log(`[contract] ${message}`);

/** @type {import('./run.ts').ContractContext} */
let ctx;
let doc;
/** Scenario tables by namespace (contract-tests/scenarios/<namespace>.cjs). */
const scenarios = new Map();
try {
  const contextPath = process.env.CONTRACT_CONTEXT;
  if (!contextPath) throw new Error('CONTRACT_CONTEXT is not set: run these hooks through `npm run contract`');
  ctx = JSON.parse(fs.readFileSync(contextPath, 'utf8'));
  doc = require('../generated/openapi.dereferenced.json');
  const dir = path.join(__dirname, 'scenarios');
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.cjs')).sort()) scenarios.set(path.basename(file, '.cjs'), require(path.join(dir, file)));
} catch (err) {
  // Dredd only warns (and runs without hooks) when a hook file throws while loading; fail loudly instead.
  const message = `contract hooks could not start: ${err.message}`;
  hooks.beforeAll((transactions) => say(message)); // Dredd 14 calls hooks by arity: 1 = sync, 2 = callback
  hooks.beforeEach((t) => {
    t.fail = message;
  });
  return; // CommonJS: ends this module; nothing below runs
}

// ---------------------------------------------------------------------------------------------
// The document: operations by method and path, response schemas translated to JSON Schema.
// Dereferenced: no $ref to follow.
// ---------------------------------------------------------------------------------------------

/** operations["GET /operations"] = { id, namespace, kind, resource, op } */
const operations = new Map();
for (const [route, item] of Object.entries(doc.paths)) {
  for (const method of ['get', 'post', 'put', 'patch', 'delete']) {
    const op = item[method];
    if (op) {
      operations.set(`${method.toUpperCase()} ${route}`, {
        id: op.operationId,
        namespace: op.operationId.split('.')[0],
        kind: op['x-service-kind'] || 'query',
        resource: op['x-service-resource'] || null,
        op,
      });
    }
  }
}
const byId = new Map([...operations.values()].map((o) => [o.id, o]));

/** The operation that deletes records of a resource type: the command of that type named `<namespace>.Delete...`. */
function deleteOperationOf(resource) {
  const found = [...byId.values()].filter((o) => o.resource === resource && o.kind === 'command' && /\.Delete/.test(o.id));
  if (found.length !== 1) throw new Error(`no single delete operation for ${resource} in the document`);
  return found[0].id;
}

function responseOf(operation, status) {
  const response = operation.op.responses[String(status)];
  if (!response) throw new Error(`${operation.id} documents no ${status} response`);
  return response;
}

function bodySchemaOf(operation, status) {
  const content = responseOf(operation, status).content;
  if (operation.kind === 'collection' && !content?.['application/json']) return null; // 202/304 without a body, the script
  const media = content?.['application/json'];
  if (!media?.schema) throw new Error(`${operation.id} ${status} has no application/json schema`);
  // Portable: Dredd's own validator does not know the document's display-text format.
  return { $schema: 'http://json-schema.org/draft-07/schema#', ...toJsonSchema(media.schema, { portable: true }) };
}

const ajv = createAjv({ allErrors: true });
const headerValidators = new Map();
/** The documented response headers: name -> { required, validate(value) }. */
function headersOf(operation, status) {
  const cacheKey = `${operation.id} ${status}`;
  if (!headerValidators.has(cacheKey)) {
    const out = new Map();
    for (const [name, header] of Object.entries(responseOf(operation, status).headers || {})) {
      const schema = toJsonSchema(header.schema);
      const check = ajv.compile(schema);
      const types = [].concat(schema.type || []);
      out.set(name, {
        required: header.required === true,
        validate(value) {
          // Header values are text; integer/number headers are compared as numbers.
          const typed = (types.includes('integer') || types.includes('number')) && /^-?\d+(\.\d+)?$/.test(value) ? Number(value) : value;
          return check(typed) ? null : ajv.errorsText(check.errors, { dataVar: name });
        },
      });
    }
    headerValidators.set(cacheKey, out);
  }
  return headerValidators.get(cacheKey);
}

// ---------------------------------------------------------------------------------------------
// What the scenario tables work with (`kit`): setup calls, names, bodies, skips, created records.
// ---------------------------------------------------------------------------------------------

const newIdempotencyKey = () => `contract-${crypto.randomUUID()}`;
const bearer = (key) => `Bearer ${key}`;
// Well-formed (wso_<24 id chars>_<43 secret chars>) but unknown: exercises the lookup, not just the parser.
const unknownKey = () => `wso_${'0'.repeat(24)}_${crypto.randomBytes(32).toString('base64url')}`;

/** Records this run created, in creation order: id -> the operation that deletes it. */
const created = new Map();

/** Remembers the record a successful create or upsert answered with, for cleanup. */
function remember(operation, body) {
  const id = body && body.item && body.item.id;
  if (id && operation.resource && !created.has(id)) created.set(id, deleteOperationOf(operation.resource));
}

/** A setup call with the main key; resolves to the parsed 200 body, throws on any other answer. */
async function call(operationId, body) {
  const operation = byId.get(operationId);
  if (!operation) throw new Error(`no operation ${operationId} in the bundled document`);
  const headers = { Authorization: bearer(ctx.keys.main), 'Content-Type': 'application/json', Accept: 'application/json' };
  if (operation.kind === 'command') headers['Idempotency-Key'] = newIdempotencyKey();
  const res = await fetch(`${ctx.baseUrl}/operations/${operationId}`, { method: 'POST', headers, body: JSON.stringify(body), signal: AbortSignal.timeout(30_000) });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`setup call ${operationId} answered ${res.status}: ${text.slice(0, 300)}`);
  const parsed = JSON.parse(text);
  if (operation.kind === 'command') remember(operation, parsed);
  return parsed;
}

function skip(t, reason) {
  t.skip = true;
  say(`skip ${t.id}: ${reason}`);
}

const kit = {
  ctx,
  say,
  call,
  skip,
  /** Records the scenarios' setups made, by name (shared by every namespace's table). */
  seed: {},
  /** A name unique to this run, so a deployment's real records are never matched or touched. */
  name: (what) => `Contract ${ctx.runId} ${what}`,
  /** A domain unique to this run. */
  domain: (what) => `contract-${ctx.runId}-${what}.example`,
  /** An id no record has, with a type prefix. */
  missingId: (prefix) => `${prefix}_contract_missing_${crypto.randomBytes(8).toString('hex')}`,
  bodyOf: (t) => (t.request.body ? JSON.parse(t.request.body) : {}),
  setBody: (t, body) => {
    t.request.body = JSON.stringify(body);
  },
  /**
   * What the response body must also say (beyond its schema) when the documented status comes:
   * `check(body)` returns a problem (fails the transaction) or null. For the cases whose point is an
   * effect (a rule paused, a rule deleted), which a schema-valid body alone does not prove.
   */
  expect: (t, check) => {
    t.expectBody = check;
  },
  newIdempotencyKey,
};

// ---------------------------------------------------------------------------------------------
// 429: use up the throttle key's budget right before Dredd's request.
// ---------------------------------------------------------------------------------------------

/**
 * Sends GET /operations with the throttle key from several workers until its budget is used up (a
 * 429), then waits until a request sent after that 429 gets a token (200). The limiter (GCRA) frees
 * one token per 1/RATE_LIMIT_PER_SECOND, so Dredd's request, sent at once, lands between two tokens;
 * the workers keep sending until Dredd's response is in, so a token freed before Dredd's request
 * reaches the server is taken by them, not by Dredd.
 */
function startBurner(key) {
  const url = `${ctx.baseUrl}/operations`;
  const headers = { Authorization: bearer(key), Accept: 'application/json' };
  const stats = { sent: 0, limited: 0, admitted: 0 };
  let stop = false;
  let error = null;
  let firstLimitAt = null; // sequence number of the first request sent after a 429 arrived
  let seq = 0;
  let waiter = null;
  const wake = () => waiter && waiter();
  const worker = async () => {
    while (!stop) {
      const mySeq = ++seq;
      let status;
      try {
        const res = await fetch(url, { headers, signal: AbortSignal.timeout(30_000) });
        await res.arrayBuffer();
        status = res.status;
      } catch (err) {
        error = err;
        return wake();
      }
      stats.sent++;
      if (status === 429) {
        stats.limited++;
        if (firstLimitAt === null) firstLimitAt = seq + 1;
      } else if (status === 200) {
        stats.admitted++;
        // Only a request sent after a 429 came back proves a token was freed just now.
        if (firstLimitAt !== null && mySeq >= firstLimitAt) wake();
      } else {
        error = new Error(`burning the throttle key's budget: GET /operations answered ${status}`);
        return wake();
      }
    }
  };
  const workers = Array.from({ length: ctx.mode === 'local' ? 4 : 16 }, worker);
  return {
    stats,
    /** Resolves right after a fresh token was taken; throws when no 429 comes. */
    async synced(timeoutMs) {
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, timeoutMs);
        waiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      waiter = null;
      if (error) throw error;
      if (firstLimitAt === null) throw new Error(`no 429 after ${stats.sent} requests in ${timeoutMs} ms with the throttle key`);
    },
    async stop() {
      stop = true;
      await Promise.allSettled(workers);
    },
  };
}

/** Runs Dredd's request again with fetch, for the 429 retries. Same method, URL, headers and body. */
async function resend(t) {
  const res = await fetch(new URL(t.fullPath, ctx.baseUrl).href, {
    method: t.request.method,
    headers: t.request.headers,
    body: t.request.method === 'GET' ? undefined : t.request.body,
    signal: AbortSignal.timeout(30_000),
  });
  const headers = {};
  res.headers.forEach((value, key) => (headers[key] = value));
  return { statusCode: res.status, headers, body: await res.text(), bodyEncoding: 'utf-8' };
}

// ---------------------------------------------------------------------------------------------
// Preparing a transaction: the namespace's scenario for its status, or the shared one.
// ---------------------------------------------------------------------------------------------

const burners = new Map();

/** The scenario table of an operation's namespace; a namespace without one fails its transactions. */
function tableOf(operation) {
  const table = scenarios.get(operation.namespace);
  if (!table) throw new Error(`no scenario table contract-tests/scenarios/${operation.namespace}.cjs for ${operation.id}`);
  return table;
}

/** The namespace's own scenario for this operation and status, if it has one. */
const scenarioFor = (operation, status) => tableOf(operation)[status]?.[operation.id];

/** The 200 scenario's request (real ids, headers), for a status that only alters it; not its kit.expect check. */
function borrow200(operation, t) {
  scenarioFor(operation, 200)?.(t, kit);
  delete t.expectBody;
}

/** Prepares one transaction; throws when the hooks do not know how to produce its status. */
async function prepare(t) {
  const operation = operations.get(`${t.request.method} ${t.request.uri.split('?')[0]}`);
  if (!operation) throw new Error(`no operation ${t.request.method} ${t.request.uri} in the bundled document`);
  const status = Number(t.expected.statusCode);
  t.operation = operation; // for the validation hook
  const table = tableOf(operation);

  // Dredd 14 quirk: it sends every optional header parameter without an example as an empty header
  // ("Service-Act-As: "), which the service rightly refuses; drop them.
  for (const [header, value] of Object.entries(t.request.headers)) if (value === '') delete t.request.headers[header];

  // Dredd 14 ignores additionalProperties, bounds, formats and nullable (its OpenAPI 3 parser drops
  // them); validate against the real, dereferenced schema of this response instead.
  const schema = bodySchemaOf(operation, status);
  if (schema) t.expected.bodySchema = JSON.stringify(schema);

  // A namespace outside the operation convention (the public collection endpoints) prepares everything itself.
  if (table.prepare) return table.prepare(t, operation, status, kit);

  t.request.headers.Authorization = bearer(ctx.keys.main);
  // Every command gets its own key: the document's example key would replay the first response.
  if (operation.kind === 'command') t.request.headers['Idempotency-Key'] = newIdempotencyKey();

  const own = scenarioFor(operation, status);
  if (own) return own(t, kit);
  switch (status) {
    case 200:
      throw new Error(`no 200 scenario for ${operation.id} in contract-tests/scenarios/${operation.namespace}.cjs`);
    case 400:
      if (t.request.method === 'GET') {
        if (operation.op['x-service-act-as'] !== 'none') throw new Error(`no 400 scenario for GET ${operation.id}`);
        t.request.headers['Service-Act-As'] = ctx.members.olga || 'mb_contract'; // not accepted here: 400 invalid_input
        return;
      }
      borrow200(operation, t);
      kit.setBody(t, { ...kit.bodyOf(t), contract_unknown_field: true }); // bodies reject unknown fields
      return;
    case 401:
      t.request.headers.Authorization = bearer(unknownKey());
      return;
    case 413: {
      // A valid request padded past the 1 MB body limit.
      borrow200(operation, t);
      kit.setBody(t, { ...kit.bodyOf(t), contract_padding: 'x'.repeat(1_100_000) });
      return;
    }
    case 403:
      if (!ctx.keys.restricted) return skip(t, '403 needs a key without grants; pass --restricted-key.');
      t.request.headers.Authorization = bearer(ctx.keys.restricted);
      return;
    case 429: {
      if (!ctx.keys.throttle) return skip(t, '429 needs a key whose rate budget may be used up; pass --throttle-key.');
      // Run data, not the document's examples, in case the throttle key has grants and a token slips through.
      borrow200(operation, t);
      t.request.headers.Authorization = bearer(ctx.keys.throttle);
      const burner = startBurner(ctx.keys.throttle);
      burners.set(t, burner);
      try {
        await burner.synced(60_000);
      } catch (err) {
        burners.delete(t);
        await burner.stop();
        throw err;
      }
      return;
    }
    case 500:
      return skip(t, '500 internal_error only comes from a fault inside the service; it cannot be caused from outside.');
    default:
      throw new Error(`no ${status} scenario for ${operation.id} in contract-tests/scenarios/${operation.namespace}.cjs`);
  }
}

/** Checks the documented response headers; returns problems (empty when fine). */
function checkHeaders(t) {
  const problems = [];
  const real = t.real.headers || {};
  const contentType = real['content-type'];
  // Dredd 14 quirk: Gavel compares Content-Type literally, so the service's (correct)
  // "application/json; charset=utf-8" fails against "application/json". Accept exactly that form.
  if (typeof contentType === 'string' && /^(application\/json|text\/javascript)\s*(;\s*charset=utf-8\s*)?$/i.test(contentType)) {
    t.expected.headers['Content-Type'] = contentType;
  }
  for (const [header, spec] of headersOf(t.operation, Number(t.expected.statusCode))) {
    // Dredd 14 quirk: it expects every documented header, even optional ones (Idempotency-Replayed),
    // to be present; keep only the required ones in Dredd's expectation and check the rest here.
    if (!spec.required) delete t.expected.headers[header];
    const value = real[header.toLowerCase()];
    if (value === undefined) {
      if (spec.required) problems.push(`header ${header} is required but missing`);
      continue;
    }
    const problem = spec.validate(String(value));
    if (problem) problems.push(`header ${header}: ${problem} (got "${value}")`);
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// Hook registration.
// ---------------------------------------------------------------------------------------------

/** Runs an async hook body; an error fails the transaction with its message instead of being lost. */
const guarded = (fn) => (data, done) => {
  Promise.resolve()
    .then(() => fn(data))
    .then(
      () => done(),
      (err) => {
        const message = `hook error: ${err && err.message ? err.message : err}`;
        if (Array.isArray(data)) {
          say(message);
          for (const t of data) t.fail = message;
        } else {
          data.fail = message;
        }
        done();
      },
    );
};

hooks.beforeAll(
  guarded(async () => {
    say(`${ctx.mode} run ${ctx.runId} against ${ctx.baseUrl}: creating the records the transactions need (${[...scenarios.keys()].join(', ')})`);
    for (const table of scenarios.values()) if (table.setup) await table.setup(kit);
  }),
);

hooks.beforeEach(guarded(prepare));

hooks.beforeEachValidation(
  guarded(async (t) => {
    const burner = burners.get(t);
    if (burner) {
      // Dredd cannot retry: when a token was freed just before Dredd's request reached the service (a
      // deployment with 100 tokens a second, far away), send the same request again, up to 4 times.
      for (let attempt = 1; attempt <= 4 && t.real.statusCode !== 429; attempt++) {
        say(`${t.id}: got ${t.real.statusCode}, not 429 (a token was freed just before the request); retry ${attempt}`);
        await burner.synced(60_000);
        t.real = await resend(t);
      }
      await burner.stop();
      burners.delete(t);
      if (process.env.CONTRACT_DEBUG) say(`${t.id}: throttle key requests ${JSON.stringify(burner.stats)}`);
    }
    if (!t.operation) return;
    t.problems = checkHeaders(t);
    // What a scenario expects of the body beyond its schema (kit.expect), when the status is the documented one.
    if (t.expectBody && Number(t.real.statusCode) === Number(t.expected.statusCode)) {
      let problem;
      try {
        problem = t.expectBody(JSON.parse(t.real.body));
      } catch (err) {
        problem = `body: ${err.message}`;
      }
      if (problem) t.problems.push(problem);
    }
  }),
);

hooks.afterEach(
  guarded(async (t) => {
    if (burners.has(t)) {
      await burners.get(t).stop(); // the request itself failed
      burners.delete(t);
    }
    if (t.problems && t.problems.length) {
      if (t.test && t.test.valid) t.fail = t.problems.join('; ');
      else if (t.test) t.test.message = `${t.test.message || ''}${t.problems.join('\n')}\n`;
    }
    // Remember the records 200 transactions created (any type), and forget the ones they deleted.
    if (t.real && t.real.statusCode === 200 && t.operation && t.operation.kind === 'command' && t.operation.resource) {
      try {
        const body = JSON.parse(t.real.body);
        if (body.deleted === true) created.delete(body.id);
        else remember(t.operation, body);
      } catch {
        /* validation reports a malformed body */
      }
    }
    // Keep secrets out of Dredd's failure output.
    const headers = t.test && t.test.request && t.test.request.headers;
    if (headers && (headers.Authorization || headers.Cookie)) {
      t.test.request = { ...t.test.request, headers: { ...headers, ...(headers.Authorization ? { Authorization: 'Bearer [redacted]' } : {}), ...(headers.Cookie ? { Cookie: '[redacted]' } : {}) } };
    }
  }),
);

hooks.afterAll(
  guarded(async (transactions) => {
    for (const burner of burners.values()) await burner.stop();
    burners.clear();
    // Newest first: records that refer to others (deals) were created after what they refer to.
    const removed = {};
    const failed = [];
    for (const [id, deleteOperation] of [...created].reverse()) {
      try {
        const res = await call(deleteOperation, { id });
        if (res.deleted) removed[deleteOperation] = (removed[deleteOperation] || 0) + 1;
      } catch (err) {
        failed.push(`${id}: ${err.message}`);
      }
    }
    const summary = Object.entries(removed).map(([op, n]) => `${n} by ${op}`).join(', ') || 'none';
    say(`cleanup: deleted ${Object.values(removed).reduce((a, b) => a + b, 0)} of ${created.size} records this run created (${summary})`);
    for (const f of failed) say(`cleanup: could not delete ${f}`);
    // Tells run.ts that Dredd got to the end (a hook that never calls back makes Dredd exit 0 early).
    fs.writeFileSync(`${process.env.CONTRACT_CONTEXT}.done`, `${transactions.length} transactions\n`);
  }),
);
