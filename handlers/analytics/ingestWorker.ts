/**
 * The collection writer thread: runs ingestEvents for the batches the collector (collect.ts)
 * queues, on its own database connection, so that the HTTP thread keeps answering while a batch is
 * written (better-sqlite3 writes synchronously) and a second core can do the sessionization.
 * Protocol: {id, events} -> {id, ok: true} | {id, ok: false, message}; {close: true} closes the
 * connection and ends the thread.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openDatabase } from '../../db/database.ts';
import { ingestEvents } from './ingest.ts';
import type { NewAnalyticsEvent } from './rows.ts';

export type WriterRequest = { id: number; events: NewAnalyticsEvent[] } | { close: true };
export type WriterReply = { id: number; ok: true } | { id: number; ok: false; message: string; stack?: string };

const port = parentPort;
if (!port) throw new Error('ingestWorker.ts runs as a worker thread');
const db = openDatabase((workerData as { databaseUrl: string }).databaseUrl, { poolMax: 2 });

port.on('message', (message: WriterRequest) => {
  if ('close' in message) {
    void db.close().finally(() => port.close());
    return;
  }
  ingestEvents(db, message.events).then(
    () => port.postMessage({ id: message.id, ok: true } satisfies WriterReply),
    (err: unknown) => {
      const e = err instanceof Error ? err : new Error(String(err));
      port.postMessage({ id: message.id, ok: false, message: e.message, stack: e.stack } satisfies WriterReply);
    },
  );
});
