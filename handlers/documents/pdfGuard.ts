/**
 * The guarded PDF parse: every PDF the service reads (an upload's scan, a stored file read again for
 * the archive and its seal) is parsed first on a checking thread (pdfGuardWorker.ts), never on the HTTP
 * thread, within documented limits:
 *  - memory: the thread's heap is capped (resourceLimits); decoded stream bytes, which live outside the
 *    heap, are capped by the parse budget (PDF_PARSE_LIMITS.maxInflatedBytes), objects declared too;
 *  - time: a parse that has not answered by its deadline is stopped (the thread is terminated);
 *  - concurrency: at most `concurrency` parses run at once in the process, at most `queue` wait; past
 *    that the caller gets PdfGuardBusy (answered 503 `unavailable` with Retry-After: retry shortly).
 * A file that passes its limits or stops the thread is refused with a plain reason, like a damaged one.
 */
import { Worker } from 'node:worker_threads';
import type { GuardReply, GuardRequest } from './pdfGuardWorker.ts';
import type { InspectMode, ParseLimits, PdfInspection } from './pdfInspect.ts';
import { mib } from './pdfBudget.ts';

const MiB = 1024 * 1024;

/** The documented parse limits (documents.CompleteUpload's description): bytes all streams may decode to, objects a file may declare. */
export const PDF_PARSE_LIMITS = { maxInflatedBytes: 48 * MiB, maxObjects: 500_000 } as const;

export interface PdfGuardOptions {
  /** Parses running at once. */
  concurrency: number;
  /** Parses waiting for a thread; one more is PdfGuardBusy. */
  queue: number;
  /** A parse's deadline from the moment its thread takes it. */
  deadlineMs: number;
  /** The checking thread's heap (old generation) in MiB. */
  heapMb: number;
  /** An idle thread ends after this long. */
  idleMs: number;
  maxInflatedBytes: number;
  maxObjects: number;
}

export const DEFAULT_GUARD: PdfGuardOptions = { concurrency: 2, queue: 16, deadlineMs: 8000, heapMb: 256, idleMs: 30_000, ...PDF_PARSE_LIMITS };

/** Every checking thread is busy and the queue is full: retry in a few seconds. */
export class PdfGuardBusy extends Error {
  readonly retryAfterSeconds = 5;
  constructor() {
    super('every PDF checking thread is busy and the queue is full');
    this.name = 'PdfGuardBusy';
  }
}

interface Thread {
  worker: Worker;
  ready: Promise<void>;
  idle: NodeJS.Timeout | null;
  /** The job running on it: settled by its answer, its deadline or the thread's end. */
  job: ((outcome: { result: PdfInspection } | { exit: string }) => void) | null;
}


export class PdfGuard {
  private readonly idle: Thread[] = [];
  private running = 0;
  private readonly waiting: Array<() => void> = [];
  private next = 0;

  constructor(readonly options: PdfGuardOptions = DEFAULT_GUARD) {}

  /** Parses `bytes` on a checking thread (`upload` also applies the active-content rule). Throws PdfGuardBusy when full. */
  async inspect(bytes: Uint8Array, mode: InspectMode, maxPages: number): Promise<PdfInspection> {
    if (this.running >= this.options.concurrency) {
      if (this.waiting.length >= this.options.queue) throw new PdfGuardBusy();
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else this.running++;
    try {
      return await this.run(bytes, mode, { maxPages, maxInflatedBytes: this.options.maxInflatedBytes, maxObjects: this.options.maxObjects });
    } finally {
      // The slot passes to the next waiting parse, or is freed.
      const wake = this.waiting.shift();
      if (wake) wake();
      else this.running--;
    }
  }

  /** Ends the idle threads (a running parse finishes first and its thread ends then). */
  async close(): Promise<void> {
    await Promise.all(this.idle.splice(0).map((t) => t.worker.terminate()));
  }

  private start(): Thread {
    const worker = new Worker(new URL('./pdfGuardWorker.boot.mjs', import.meta.url), {
      resourceLimits: { maxOldGenerationSizeMb: this.options.heapMb, maxYoungGenerationSizeMb: 32, stackSizeMb: 4 },
    });
    worker.unref();
    const thread: Thread = { worker, ready: Promise.resolve(), idle: null, job: null };
    thread.ready = new Promise<void>((resolve, reject) => {
      worker.on('message', (reply: GuardReply) => {
        if ('ready' in reply) {
          if (reply.ready) resolve();
          else reject(new Error(`the PDF checking thread could not start: ${reply.message}`));
        } else thread.job?.({ result: reply.result });
      });
      worker.on('error', (err: Error & { code?: string }) => {
        reject(err);
        thread.job?.({ exit: err.code === 'ERR_WORKER_OUT_OF_MEMORY' ? 'memory' : err.message });
      });
      worker.on('exit', (code) => {
        reject(new Error(`the PDF checking thread exited (code ${code}) before it was ready`));
        thread.job?.({ exit: `exited with code ${code}` });
        const i = this.idle.indexOf(thread);
        if (i >= 0) this.idle.splice(i, 1);
      });
    });
    return thread;
  }

  private async run(bytes: Uint8Array, mode: InspectMode, limits: ParseLimits): Promise<PdfInspection> {
    const thread = this.idle.pop() ?? this.start();
    if (thread.idle) clearTimeout(thread.idle);
    thread.idle = null;
    await thread.ready;
    // One exact copy, handed over: the caller keeps its bytes.
    const copy = new Uint8Array(bytes);
    const outcome = await new Promise<{ result: PdfInspection } | { exit: string }>((resolve) => {
      const timer = setTimeout(() => resolve({ exit: 'deadline' }), this.options.deadlineMs);
      thread.job = (o) => {
        clearTimeout(timer);
        resolve(o);
      };
      const request: GuardRequest = { id: ++this.next, bytes: copy, limits, mode };
      thread.worker.postMessage(request, [copy.buffer]);
    });
    thread.job = null;
    if ('result' in outcome) {
      this.idle.push(thread);
      thread.idle = setTimeout(() => {
        const i = this.idle.indexOf(thread);
        if (i >= 0) this.idle.splice(i, 1);
        void thread.worker.terminate();
      }, this.options.idleMs);
      thread.idle.unref();
      return outcome.result;
    }
    void thread.worker.terminate();
    if (outcome.exit === 'deadline') return { ok: false, reason: `the PDF is too complex to check: reading it takes longer than ${this.options.deadlineMs / 1000} s` };
    if (outcome.exit === 'memory') return { ok: false, reason: `the PDF is too large to check: reading it needs more than ${mib(this.options.heapMb * MiB)} of memory` };
    return { ok: false, reason: 'the PDF is damaged: reading it stopped the checker' };
  }
}

/** The process's guard: one pool for every PDF parse of every service in the process. */
export const pdfGuard = new PdfGuard();
