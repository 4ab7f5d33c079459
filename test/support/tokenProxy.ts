/**
 * A test-only loopback proxy in front of the service that adds `Authorization: Bearer <token>` to every
 * request, for MCP clients that cannot be given a token (the conformance suite's scenarios connect with
 * a bare URL). It keeps `Host` and `Origin` as the client sent them, rewriting only its own port to the
 * service's (so `localhost:<proxy>` arrives as `localhost:<service>`, and `evil.example.com` stays what
 * it is: the service's DNS-rebinding check sees what the client sent). Listens on 127.0.0.1 only and
 * never forwards anywhere but the one target; a header the client set itself is replaced.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TokenProxy {
  /** `http://localhost:<port>`: the DNS-rebinding scenario wants a localhost URL. */
  origin: string;
  port: number;
  /** Requests forwarded so far (method and path). */
  seen: string[];
  close(): Promise<void>;
}

export async function startTokenProxy(target: { port: number; host?: string }, token: () => string): Promise<TokenProxy> {
  const seen: string[] = [];
  let port = 0;
  const swapPort = (value: string) => value.replace(new RegExp(`:${port}$`), `:${target.port}`);
  const server = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    const headers: http.OutgoingHttpHeaders = { ...req.headers, authorization: `Bearer ${token()}` };
    if (req.headers.host) headers.host = swapPort(req.headers.host);
    if (req.headers.origin) headers.origin = swapPort(req.headers.origin);
    const upstream = http.request({ host: target.host ?? '127.0.0.1', port: target.port, method: req.method, path: req.url, headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', (err) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`proxy: ${err.message}`);
    });
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  return {
    origin: `http://localhost:${port}`,
    port,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
