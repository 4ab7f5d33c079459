/**
 * The operator's egress settings (server/egress/environment.ts): strict by default, the test
 * relaxations (extra ports, exact loopback pairs, a test CA) each named for the log, and a readable
 * error for every bad value, from egressPolicyFromEnv and from loadConfig.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { egressPolicyFromEnv, relaxations } from '../../server/egress.ts';
import { loadConfig } from '../../server/config.ts';

describe('egress: configuration (egressPolicyFromEnv, loadConfig, relaxations)', function () {
  let dir: string;
  let caFile: string;
  before(function () {
    this.timeout(20_000);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'egress-env-'));
    caFile = path.join(dir, 'ca.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', path.join(dir, 'ca.key'), '-out', caFile, '-days', '1', '-subj', '/CN=env test CA'], { stdio: 'pipe' });
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('is strict by default: 443 only, no allow-listed destination, system CAs only, nothing to log', () => {
    const policy = egressPolicyFromEnv({});
    assert.deepEqual(policy, { allowedPorts: [], allowDestinations: [], testCa: null });
    assert.deepEqual(egressPolicyFromEnv({ EGRESS_ALLOWED_PORTS: '', EGRESS_ALLOW_DESTINATIONS: ' ', EGRESS_TEST_CA_FILE: '' }), policy);
    assert.deepEqual(relaxations(policy), []);
    assert.deepEqual(loadConfig({}).egress, policy);
  });

  it('reads extra ports, exact loopback pairs and a test CA, and names every relaxation', () => {
    const policy = egressPolicyFromEnv({
      EGRESS_ALLOWED_PORTS: '8443, 9000,8443 443',
      EGRESS_ALLOW_DESTINATIONS: '127.0.0.1:9443,[::1]:9444 127.0.0.5:9443',
      EGRESS_TEST_CA_FILE: caFile,
    });
    assert.deepEqual(policy.allowedPorts, [8443, 9000]);
    assert.deepEqual(policy.allowDestinations, [{ host: '127.0.0.1', port: 9443 }, { host: '::1', port: 9444 }, { host: '127.0.0.5', port: 9443 }]);
    assert.equal(policy.testCa, fs.readFileSync(caFile, 'utf8'));
    const lines = relaxations(policy);
    assert.equal(lines.length, 3);
    assert.match(lines.join('\n'), /127\.0\.0\.1:9443, \[::1\]:9444, 127\.0\.0\.5:9443/);
    assert.match(lines.join('\n'), /EGRESS_TEST_CA_FILE/);
    assert.match(lines.join('\n'), /8443, 9000/);
    assert.deepEqual(loadConfig({ EGRESS_ALLOW_DESTINATIONS: '127.0.0.1:9443' }).egress.allowDestinations, [{ host: '127.0.0.1', port: 9443 }]);
    assert.deepEqual(relaxations(egressPolicyFromEnv({ EGRESS_ALLOWED_PORTS: '8443' })), ['EGRESS RELAXED: webhook deliveries may use ports besides 443 (EGRESS_ALLOWED_PORTS): 8443']);
  });

  const bad: Array<[string, string, RegExp]> = [
    ['EGRESS_ALLOW_DESTINATIONS', '10.0.0.0/8', /EGRESS_ALLOW_DESTINATIONS: "10\.0\.0\.0\/8" is not allowed: only exact loopback/],
    ['EGRESS_ALLOW_DESTINATIONS', '127.0.0.0/8', /only exact loopback/],
    ['EGRESS_ALLOW_DESTINATIONS', 'localhost:9443', /"localhost:9443" is not allowed/],
    ['EGRESS_ALLOW_DESTINATIONS', 'receiver.example.com:9443', /no names/],
    ['EGRESS_ALLOW_DESTINATIONS', '127.0.0.1', /"127\.0\.0\.1" is not allowed/],
    ['EGRESS_ALLOW_DESTINATIONS', '127.0.0.1:*', /is not allowed/],
    ['EGRESS_ALLOW_DESTINATIONS', '127.0.0.1:0', /not a port/],
    ['EGRESS_ALLOW_DESTINATIONS', '127.0.0.1:70000', /not a port/],
    ['EGRESS_ALLOW_DESTINATIONS', '10.0.0.1:9443', /not a loopback address \(private\)/],
    ['EGRESS_ALLOW_DESTINATIONS', '8.8.8.8:443', /not a loopback address \(unicast\)/],
    ['EGRESS_ALLOW_DESTINATIONS', '169.254.169.254:80', /not a loopback address/],
    ['EGRESS_ALLOW_DESTINATIONS', '127.1:9443', /is not allowed/],
    ['EGRESS_ALLOW_DESTINATIONS', '0x7f000001:9443', /is not allowed/],
    ['EGRESS_ALLOW_DESTINATIONS', '[::ffff:127.0.0.1]:9443', /not a loopback address/],
    ['EGRESS_ALLOW_DESTINATIONS', '::1:9443', /is not allowed/],
    ['EGRESS_ALLOW_DESTINATIONS', 'https://127.0.0.1:9443', /is not allowed/],
    ['EGRESS_ALLOWED_PORTS', 'abc', /EGRESS_ALLOWED_PORTS: "abc" is not a port/],
    ['EGRESS_ALLOWED_PORTS', '0', /not a port/],
    ['EGRESS_ALLOWED_PORTS', '65536', /not a port/],
    ['EGRESS_ALLOWED_PORTS', '-1', /not a port/],
    ['EGRESS_ALLOWED_PORTS', '8000-9000', /not a port/],
    ['EGRESS_TEST_CA_FILE', '/nonexistent/ca.pem', /EGRESS_TEST_CA_FILE: cannot read "\/nonexistent\/ca\.pem" \(ENOENT\)/],
  ];
  for (const [name, value, message] of bad) {
    it(`refuses ${name}="${value}" with a readable error (loadConfig too)`, () => {
      assert.throws(() => egressPolicyFromEnv({ [name]: value }), message);
      assert.throws(() => loadConfig({ [name]: value }), message);
    });
  }

  it('refuses a test CA file that holds no certificate', () => {
    const notPem = path.join(dir, 'not.pem');
    fs.writeFileSync(notPem, 'hello');
    assert.throws(() => egressPolicyFromEnv({ EGRESS_TEST_CA_FILE: notPem }), /holds no PEM certificate/);
    assert.throws(() => egressPolicyFromEnv({ EGRESS_TEST_CA_FILE: path.join(dir, 'ca.key') }), /holds no PEM certificate/);
  });
});
