/**
 * The baseline of `npm run bench`: a bare express 5 JSON echo server. POST to any path answers the
 * parsed JSON body as JSON. Listens on PORT (default 8090). Started (and stopped) by scripts/bench.ts.
 */
import type { AddressInfo } from 'node:net';
import express from 'express';

const app = express();
app.use(express.json());
app.post('/{*path}', (req, res) => {
  res.json(req.body);
});

const server = app.listen(Number(process.env.PORT ?? 8090), () => {
  const { port } = server.address() as AddressInfo;
  console.log(`echo listening on http://localhost:${port}`);
});
server.keepAliveTimeout = 65_000;
process.on('SIGTERM', () => server.close(() => process.exit(0)));
process.on('SIGINT', () => server.close(() => process.exit(0)));
