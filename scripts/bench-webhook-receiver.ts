/**
 * The HTTPS webhook receiver of `npm run bench:webhooks`, in its own process (forked with an IPC
 * channel, so it never shares an event loop with the load generator): answers `200 ok` at once, except
 * under `/stall/` (never answers: the service's 10 s limit ends each attempt) and `/slow/<ms>/` (answers
 * after that many ms), and records, per request, its arrival time (Unix ms, fractional), the payload's
 * `occurred_at`, `webhook_id` and `event_id`. The parent sends `{ type: 'listen', key, cert }` and gets
 * `{ type: 'listening', port }`; `{ type: 'take', from }` returns the records from index `from` on as
 * `{ type: 'records', from, at, occurredAt, webhookIds, eventIds }`; `{ type: 'count' }` returns
 * `{ type: 'count', n }`. Listens on 127.0.0.1 only.
 */
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';

if (!process.send) throw new Error('bench-webhook-receiver: run me with child_process.fork (an IPC channel)');
const send = (msg: unknown) => process.send!(msg);

const at: number[] = [];
const occurredAt: number[] = [];
const webhookIds: string[] = [];
const eventIds: string[] = [];
let bad = 0;

const now = () => performance.timeOrigin + performance.now();

process.on('message', (msg: { type: string; key?: string; cert?: string; from?: number }) => {
  if (msg.type === 'listen') {
    const server = https.createServer({ key: msg.key, cert: msg.cert, keepAliveTimeout: 5000 }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const t = now();
        const ok = () => {
          res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
          res.end('ok');
        };
        const slow = /^\/slow\/(\d+)\//.exec(req.url ?? '');
        if (slow) setTimeout(ok, Number(slow[1]));
        else if (!(req.url ?? '').startsWith('/stall/')) ok();
        try {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { occurred_at?: number; webhook_id?: string; event_id?: string };
          at.push(t);
          occurredAt.push(Number(body.occurred_at));
          webhookIds.push(String(body.webhook_id));
          eventIds.push(String(body.event_id));
        } catch {
          bad++;
        }
      });
    });
    server.listen(0, '127.0.0.1', () => send({ type: 'listening', port: (server.address() as AddressInfo).port }));
  } else if (msg.type === 'take') {
    const from = msg.from ?? 0;
    send({ type: 'records', from, at: at.slice(from), occurredAt: occurredAt.slice(from), webhookIds: webhookIds.slice(from), eventIds: eventIds.slice(from), bad });
  } else if (msg.type === 'count') {
    send({ type: 'count', n: at.length, bad });
  }
});
process.on('disconnect', () => process.exit(0));
