/**
 * A real SMTP server for tests (smtp-server on 127.0.0.1, no TLS or authentication), keeping every mail
 * it takes parsed by mailparser, with refusals scripted by the recipient's address; and a free port.
 */
import net from 'node:net';
import { type ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';

/** How long the test server takes to answer a mail to `slow...@`. */
export const SLOW_MS = 400;

export interface Mail {
  to: string[];
  mail: ParsedMail;
}

/**
 * A real SMTP server on 127.0.0.1: `refused...@` is refused at RCPT with 550 (for good),
 * `greylist...@` always with 450 (for now), `flaky...@` with 450 the first `flakyTimes` tries and
 * then taken; `slow...@` is taken but answered after `delays.slowMs` (SLOW_MS unless a test changes it);
 * `stall...@` is answered at RCPT only when the test calls `release()` (or after `stallMs`, when given: a
 * mail server that hangs). Every taken mail is kept, parsed.
 */
export async function startMailServer(flakyTimes = 2, port = 0, options: { stallMs?: number } = {}) {
  const mails: Mail[] = [];
  const tries = new Map<string, number>();
  const delays = { slowMs: SLOW_MS };
  const held: Array<() => void> = [];
  let onHeld: (() => void) | null = null;
  const release = () => {
    for (const answer of held.splice(0)) answer();
  };
  const server = new SMTPServer({
    logger: false,
    disabledCommands: ['STARTTLS', 'AUTH'],
    onRcptTo(address, _session, callback) {
      const a = address.address;
      if (a.startsWith('stall')) {
        let answered = false;
        const answer = () => {
          if (!answered) callback();
          answered = true;
        };
        held.push(answer);
        onHeld?.();
        if (options.stallMs !== undefined) setTimeout(answer, options.stallMs).unref();
        return;
      }
      if (a.startsWith('refused')) return callback(Object.assign(new Error(`5.1.1 <${a}>: mailbox unavailable`), { responseCode: 550 }));
      if (a.startsWith('greylist')) return callback(Object.assign(new Error('4.7.1 greylisted, try again later'), { responseCode: 450 }));
      if (a.startsWith('flaky')) {
        const n = (tries.get(a) ?? 0) + 1;
        tries.set(a, n);
        if (n <= flakyTimes) return callback(Object.assign(new Error('4.2.2 mailbox full, try again later'), { responseCode: 452 }));
      }
      return callback();
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const to = session.envelope.rcptTo.map((r) => r.address);
        simpleParser(Buffer.concat(chunks)).then(
          (mail) => {
            mails.push({ to, mail });
            // slow...@: taken, but answered only after SLOW_MS (a server slower than the request's wait).
            if (to.some((a) => a.startsWith('slow'))) setTimeout(() => callback(), delays.slowMs);
            else callback();
          },
          (err: Error) => callback(err),
        );
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const bound = (server.server.address() as net.AddressInfo).port;
  return {
    port: bound,
    url: `smtp://127.0.0.1:${bound}`,
    mails,
    /** How long `slow...@` mails are answered after (changeable per test). */
    delays,
    /** Resolves once a `stall...@` recipient waits for its answer (at once if one does). */
    stalled: () => new Promise<void>((resolve) => (held.length ? resolve() : (onHeld = () => resolve()))),
    /** Answers every `stall...@` recipient waiting now. */
    release,
    /** The mails taken for an address, oldest first. */
    to: (address: string) => mails.filter((m) => m.to.includes(address)),
    close: () => {
      release();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
export type MailServer = Awaited<ReturnType<typeof startMailServer>>;

/** A loopback port nothing listens on (for now). */
export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}
