/**
 * A PDF checking thread (pdfGuard.ts starts a few and gives each one file at a time): parses under the
 * parse budget (pdfBudget.ts) inside the thread's heap limit, so a hostile file costs this thread, never
 * the HTTP thread. Protocol: {id, bytes, limits, mode} -> {id, result}; the first message is {ready: true}.
 */
import { parentPort } from 'node:worker_threads';
import { installBudget } from './pdfBudget.ts';
import { type InspectMode, inspectParsed, type ParseLimits, type PdfInspection } from './pdfInspect.ts';

export type GuardRequest = { id: number; bytes: Uint8Array; limits: ParseLimits; mode: InspectMode };
export type GuardReply = { ready: true } | { ready: false; message: string } | { id: number; result: PdfInspection };

const port = parentPort;
if (!port) throw new Error('pdfGuardWorker.ts runs as a worker thread');

try {
  await installBudget();
  port.postMessage({ ready: true } satisfies GuardReply);
} catch (err) {
  port.postMessage({ ready: false, message: err instanceof Error ? err.message : String(err) } satisfies GuardReply);
  process.exit(1);
}

port.on('message', (message: GuardRequest) => {
  void inspectParsed(message.bytes, message.limits, message.mode).then((result) => port.postMessage({ id: message.id, result } satisfies GuardReply));
});
