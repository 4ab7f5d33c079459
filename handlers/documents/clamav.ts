/**
 * A ClamAV client: streams a file to clamd with the INSTREAM command (over TCP or a Unix socket) without
 * holding it whole, and reads the verdict. Anything that keeps the daemon from giving one is ScannerUnavailable.
 */
import net from 'node:net';

export type ClamavAddress = { kind: 'tcp'; host: string; port: number } | { kind: 'unix'; path: string };

export interface ClamavConfig {
  address: ClamavAddress;
  /** Milliseconds allowed to open the connection. */
  connectTimeoutMs?: number;
  /** Milliseconds allowed for the whole scan, from connecting to the verdict. */
  timeoutMs?: number;
}

export type ClamavVerdict = { clean: true } | { clean: false; signature: string };

export type UnavailableReason = 'connection' | 'timeout' | 'size-limit' | 'protocol';

export class ScannerUnavailable extends Error {
  override name = 'ScannerUnavailable';
  constructor(
    readonly reason: UnavailableReason,
    message: string,
  ) {
    super(message);
  }
}

export class ClamavUrlError extends Error {
  override name = 'ClamavUrlError';
}

const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
const DEFAULT_TIMEOUT_MS = 60_000;
/** Chunks sent to clamd; each must stay under its StreamMaxLength, and small ones keep memory flat. */
const CHUNK_BYTES = 64 * 1024;
const MAX_REPLY_BYTES = 4096;

/** Parses `tcp://host:port` or `unix:///path/to/clamd.sock`; throws ClamavUrlError saying what is wrong. */
export function parseClamavUrl(value: string): ClamavAddress {
  const text = value.trim();
  if (!text) throw new ClamavUrlError('CLAMAV_URL is empty; expected tcp://host:port or unix:///path/to/clamd.sock');
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ClamavUrlError(`CLAMAV_URL "${text}" is not a URL; expected tcp://host:port or unix:///path/to/clamd.sock`);
  }
  if (url.username || url.password || url.search || url.hash) {
    throw new ClamavUrlError('CLAMAV_URL takes no user, password, query or fragment; expected tcp://host:port or unix:///path/to/clamd.sock');
  }
  if (url.protocol === 'unix:') {
    if (url.host) throw new ClamavUrlError(`CLAMAV_URL "${text}" has a host; a Unix socket is written unix:///path/to/clamd.sock (three slashes)`);
    const path = decodeURIComponent(url.pathname);
    if (!path || path === '/') throw new ClamavUrlError('CLAMAV_URL unix:// needs the socket path, e.g. unix:///run/clamav/clamd.ctl');
    return { kind: 'unix', path };
  }
  if (url.protocol === 'tcp:') {
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    if (!host) throw new ClamavUrlError(`CLAMAV_URL "${text}" has no host; expected tcp://host:port`);
    if (!url.port) throw new ClamavUrlError(`CLAMAV_URL "${text}" has no port; clamd usually listens on tcp://${url.hostname}:3310`);
    if (url.pathname && url.pathname !== '/') throw new ClamavUrlError(`CLAMAV_URL "${text}" has a path; expected tcp://host:port`);
    if (Number(url.port) === 0) throw new ClamavUrlError(`CLAMAV_URL "${text}" has port 0; expected the port clamd listens on (usually 3310)`);
    return { kind: 'tcp', host, port: Number(url.port) };
  }
  throw new ClamavUrlError(`CLAMAV_URL scheme "${url.protocol.replace(/:$/, '')}" is not supported; use tcp://host:port or unix:///path/to/clamd.sock`);
}

/** The address as an operator wrote it, for messages. */
export function describeAddress(address: ClamavAddress): string {
  return address.kind === 'tcp' ? `tcp://${address.host.includes(':') ? `[${address.host}]` : address.host}:${address.port}` : `unix://${address.path}`;
}

function connect(config: ClamavConfig): Promise<net.Socket> {
  const where = describeAddress(config.address);
  const limitMs = Math.min(config.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS, config.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  return new Promise((resolve, reject) => {
    const socket = config.address.kind === 'tcp' ? net.connect({ host: config.address.host, port: config.address.port }) : net.connect({ path: config.address.path });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new ScannerUnavailable('timeout', `ClamAV at ${where} did not accept a connection within ${limitMs} ms`));
    }, limitMs);
    socket.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(new ScannerUnavailable('connection', `cannot connect to ClamAV at ${where}: ${err.code ?? err.message}`));
    });
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.removeAllListeners('error');
      resolve(socket);
    });
  });
}

/** The daemon's reply: text up to the NUL that ends a z-command reply, or up to the end of the connection. */
function readReply(socket: net.Socket, where: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const done = () => resolve(text.replace(/\0[\s\S]*$/, '').trim());
    socket.on('data', (data: Buffer) => {
      text += data.toString('latin1');
      if (text.includes('\0') || text.length > MAX_REPLY_BYTES) done();
    });
    socket.once('end', done);
    socket.once('close', done);
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (text) done();
      else reject(err instanceof ScannerUnavailable ? err : new ScannerUnavailable('connection', `ClamAV at ${where} dropped the connection without a verdict (${err.code ?? err.message}); clamd does this when a file is over its StreamMaxLength`));
    });
  });
}

/** Writes and then yields one turn, so a reply clamd sent before closing (a size limit) is read before the next write meets the closed socket. */
function write(socket: net.Socket, bytes: Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => socket.write(bytes, (err) => (err ? reject(err) : setImmediate(resolve))));
}

function lengthPrefix(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

function verdict(reply: string, where: string): ClamavVerdict {
  if (/^stream: OK$/.test(reply)) return { clean: true };
  const found = /^stream: (.+) FOUND$/.exec(reply);
  if (found) return { clean: false, signature: found[1]! };
  if (/size limit exceeded/i.test(reply)) return unavailable('size-limit', `ClamAV at ${where} refused the file: ${reply} (the file is over its StreamMaxLength)`);
  if (!reply) return unavailable('protocol', `ClamAV at ${where} closed the connection without a verdict`);
  return unavailable('protocol', `ClamAV at ${where} answered with an error: ${reply.slice(0, 200)}`);
}

function unavailable(reason: UnavailableReason, message: string): never {
  throw new ScannerUnavailable(reason, message);
}

class SourceFailed {
  constructor(readonly error: unknown) {}
}

/**
 * Streams `source` to clamd (INSTREAM) and returns its verdict. Throws ScannerUnavailable when there is
 * none (connection refused or dropped, timeout, size limit); an error thrown by `source` is rethrown as is.
 */
export async function scanStream(config: ClamavConfig, source: AsyncIterable<Uint8Array>): Promise<ClamavVerdict> {
  const where = describeAddress(config.address);
  const timeoutMs = config.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  let timedOut = false;
  const started = performance.now();
  const socket = await connect(config);
  // The overall limit counts the connection time too.
  const timer = setTimeout(
    () => {
      timedOut = true;
      socket.destroy(new ScannerUnavailable('timeout', `ClamAV at ${where} gave no verdict within ${timeoutMs} ms`));
    },
    Math.max(0, timeoutMs - (performance.now() - started)),
  );
  let replied = false;
  const reply = readReply(socket, where).finally(() => (replied = true));
  const settled = reply.then(
    () => null,
    () => null,
  );
  try {
    await write(socket, Buffer.from('zINSTREAM\0', 'latin1'));
    const iterator = source[Symbol.asyncIterator]();
    while (!replied) {
      let step: IteratorResult<Uint8Array> | null;
      try {
        // A source that stalls must not outlive the verdict or the timeout.
        const next = iterator.next();
        next.catch(() => undefined);
        step = await Promise.race([next, settled]);
      } catch (err) {
        throw new SourceFailed(err);
      }
      if (!step) break;
      if (step.done) {
        await write(socket, lengthPrefix(0));
        break;
      }
      for (let at = 0; at < step.value.length && !replied; at += CHUNK_BYTES) {
        const piece = step.value.subarray(at, at + CHUNK_BYTES);
        await write(socket, Buffer.concat([lengthPrefix(piece.length), piece]));
      }
    }
    if (replied) void Promise.resolve(iterator.return?.()).catch(() => undefined);
  } catch (err) {
    if (err instanceof SourceFailed) {
      clearTimeout(timer);
      socket.destroy();
      throw err.error;
    }
    // A failed write: clamd may have answered (a size limit) and closed; its reply says why.
  }
  try {
    return verdict(await reply, where);
  } catch (err) {
    if (timedOut) throw new ScannerUnavailable('timeout', `ClamAV at ${where} gave no verdict within ${timeoutMs} ms`);
    throw err;
  } finally {
    clearTimeout(timer);
    socket.destroy();
  }
}

/** Sends PING and resolves true on PONG; false on anything else, never throws. */
export async function pingClamd(config: ClamavConfig): Promise<boolean> {
  let socket: net.Socket | undefined;
  try {
    socket = await connect(config);
    const reply = readReply(socket, describeAddress(config.address));
    await write(socket, Buffer.from('zPING\0', 'latin1'));
    const timeout = new Promise<string>((resolve) => setTimeout(() => resolve(''), config.timeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS).unref());
    return (await Promise.race([reply, timeout])) === 'PONG';
  } catch {
    return false;
  } finally {
    socket?.destroy();
  }
}
