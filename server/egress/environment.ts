/**
 * The egress environment: the operator's relaxations for local test receivers, read from
 * EGRESS_ALLOWED_PORTS, EGRESS_ALLOW_DESTINATIONS and EGRESS_TEST_CA_FILE (off by default), and the
 * lines that name them loudly in the log at start.
 */
import fs from 'node:fs';
import tls from 'node:tls';
import ipaddr from 'ipaddr.js';
import { canonicalAddress, type EgressPolicy } from './policy.ts';

const MAX_PORT = 65535;

function portFrom(name: string, raw: string): number {
  if (!/^\d{1,5}$/.test(raw) || Number(raw) < 1 || Number(raw) > MAX_PORT) throw new Error(`${name}: "${raw}" is not a port (1-${MAX_PORT})`);
  return Number(raw);
}

const listFrom = (raw: string | undefined) => (raw ?? '').split(/[\s,]+/).filter(Boolean);

/** Reads EGRESS_ALLOWED_PORTS, EGRESS_ALLOW_DESTINATIONS and EGRESS_TEST_CA_FILE; throws a readable error on bad values. */
export function egressPolicyFromEnv(env: NodeJS.ProcessEnv): EgressPolicy {
  const allowedPorts = [...new Set(listFrom(env.EGRESS_ALLOWED_PORTS).map((p) => portFrom('EGRESS_ALLOWED_PORTS', p)))].filter((p) => p !== 443);

  const allowDestinations: Array<{ host: string; port: number }> = [];
  for (const entry of listFrom(env.EGRESS_ALLOW_DESTINATIONS)) {
    const rule = 'only exact loopback address:port pairs such as 127.0.0.1:9443 or [::1]:9443 (no names, no ranges)';
    const match = /^(?:\[([0-9a-fA-F:.]+)\]|(\d{1,3}(?:\.\d{1,3}){3})):(\d+)$/.exec(entry);
    if (!match) throw new Error(`EGRESS_ALLOW_DESTINATIONS: "${entry}" is not allowed: ${rule}`);
    const canonical = canonicalAddress(match[1] ?? match[2]!);
    if (!canonical) throw new Error(`EGRESS_ALLOW_DESTINATIONS: "${entry}" is not allowed: ${rule}`);
    const range = ipaddr.parse(canonical.address).range();
    if (range !== 'loopback') throw new Error(`EGRESS_ALLOW_DESTINATIONS: "${entry}" is not a loopback address (${range}): ${rule}`);
    const port = portFrom('EGRESS_ALLOW_DESTINATIONS', match[3]!);
    if (!allowDestinations.some((d) => d.host === canonical.address && d.port === port)) allowDestinations.push({ host: canonical.address, port });
  }

  let testCa: string | null = null;
  const caFile = env.EGRESS_TEST_CA_FILE?.trim();
  if (caFile) {
    let pem: string;
    try {
      pem = fs.readFileSync(caFile, 'utf8');
    } catch (error) {
      throw new Error(`EGRESS_TEST_CA_FILE: cannot read "${caFile}" (${(error as { code?: string }).code ?? (error as Error).message})`);
    }
    if (!/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.test(pem)) throw new Error(`EGRESS_TEST_CA_FILE: "${caFile}" holds no PEM certificate`);
    try {
      tls.createSecureContext({ ca: pem });
    } catch (error) {
      throw new Error(`EGRESS_TEST_CA_FILE: "${caFile}" is not a usable CA certificate (${(error as Error).message})`);
    }
    testCa = pem;
  }
  return Object.freeze({ allowedPorts: Object.freeze(allowedPorts), allowDestinations: Object.freeze(allowDestinations), testCa });
}

const formatDestination = (d: { host: string; port: number }) => (d.host.includes(':') ? `[${d.host}]:${d.port}` : `${d.host}:${d.port}`);

/** Lines to log loudly at start when the policy relaxes anything (test CA, allow-listed destinations, extra ports); empty otherwise. */
export function relaxations(policy: EgressPolicy): string[] {
  const lines: string[] = [];
  if (policy.allowDestinations.length) {
    lines.push(`EGRESS RELAXED: webhook deliveries may reach these non-public destinations (EGRESS_ALLOW_DESTINATIONS, for test receivers only): ${policy.allowDestinations.map(formatDestination).join(', ')}`);
  }
  if (policy.testCa) {
    const count = (policy.testCa.match(/-----BEGIN CERTIFICATE-----/g) ?? []).length;
    lines.push(`EGRESS RELAXED: ${count} extra CA certificate${count === 1 ? '' : 's'} trusted for webhook TLS (EGRESS_TEST_CA_FILE, for test receivers only)`);
  }
  if (policy.allowedPorts.length) {
    lines.push(`EGRESS RELAXED: webhook deliveries may use ports besides 443 (EGRESS_ALLOWED_PORTS): ${policy.allowedPorts.join(', ')}`);
  }
  return lines;
}
