'use strict';
// NATS connection options pass through to the client: user and password,
// token, nkey, TLS (with the servers list and reconnect policy), against real
// nats-server processes that require them; a wrong secret is a coded
// ERR_PROCWIRE_CONNECT_FAILED.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert');
const childProcess = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const procwire = require('..');
const { cert, key } = require('../bench/lib/test-cert');
const { findExecutable, freePort } = require('../bench/lib/servers');
const { servesAs } = require('./helpers/nats-server');
const { sleep } = require('./helpers/wait');

const bin = findExecutable('nats-server', []);
const skip = bin ? false : 'nats-server is not installed (scripts/setup.sh installs it)';

// One nats-server with `config` (nats-server's config file syntax) on free
// ports; tried again on fresh ports if it does not come up.
async function startWith(dir, name, config) {
  for (let attempt = 1; attempt <= 3; attempt++) {
    const port = await freePort();
    const monitor = await freePort();
    const file = path.join(dir, `${name}.conf`);
    fs.writeFileSync(file, `listen: 127.0.0.1:${port}\nhttp: 127.0.0.1:${monitor}\nserver_name: ${name}\n${config}\n`);
    const proc = childProcess.spawn(bin, ['-c', file], { stdio: 'ignore' });
    const exited = new Promise((r) => proc.once('exit', r));
    const stop = async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      await exited;
    };
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && proc.exitCode === null) {
      if (await servesAs(monitor, name, port)) return { port, stop };
      await sleep(25);
    }
    await stop();
  }
  throw new Error(`nats-server ${name} did not start`);
}

describe('NATS connection options', { skip, timeout: 60_000 }, () => {
  let dir;
  const servers = [];
  const user = require('@nats-io/nkeys').createUser();
  const seed = new TextDecoder().decode(user.getSeed());
  let auth;
  let token;
  let tls;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-natsopts-'));
    fs.writeFileSync(path.join(dir, 'cert.pem'), cert);
    fs.writeFileSync(path.join(dir, 'key.pem'), key);
    auth = await startWith(dir, 'auth', `authorization { users = [ { user: alice, password: s3cret }, { nkey: ${user.getPublicKey()} } ] }`);
    token = await startWith(dir, 'token', 'authorization { token: t0ken }');
    tls = await startWith(dir, 'tls', `tls { cert_file: "${path.join(dir, 'cert.pem')}", key_file: "${path.join(dir, 'key.pem')}" }`);
    servers.push(auth, token, tls);
  });

  after(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  // A request over a core channel with these options on both ends.
  async function roundTrip(url, options) {
    const subject = `opts.${process.pid}.${Math.random().toString(36).slice(2)}`;
    const server = procwire.listen(url, { subject, ...options }, (ch) => ch.respond((v) => v + 1));
    await server.ready;
    const ch = await procwire.connect(url, { subject, ...options });
    try {
      return await ch.request(41, { timeout: 10_000 });
    } finally {
      ch.close();
      server.close();
    }
  }

  for (const natsClient of ['@nats-io/transport-node', 'nats']) {
    it(`user and password, nkey (${natsClient})`, async () => {
      const url = `nats://127.0.0.1:${auth.port}`;
      assert.strictEqual(await roundTrip(url, { natsClient, credentials: { user: 'alice', pass: 's3cret' } }), 42);
      assert.strictEqual(await roundTrip(url, { natsClient, credentials: { nkey: seed } }), 42);
      const noRetry = { natsClient, nats: { maxReconnectAttempts: 0, reconnect: false } };
      await assert.rejects(procwire.connect(url, { subject: 'x', credentials: { user: 'alice', pass: 'wrong' }, ...noRetry }),
        { code: 'ERR_PROCWIRE_CONNECT_FAILED' });
      await assert.rejects(procwire.connect(url, { subject: 'x', ...noRetry }), { code: 'ERR_PROCWIRE_CONNECT_FAILED' });
    });
  }

  it('token', async () => {
    assert.strictEqual(await roundTrip(`nats://127.0.0.1:${token.port}`, { credentials: { token: 't0ken' } }), 42);
  });

  it('TLS, with the servers list: the first server is down', async () => {
    const down = await freePort();
    const url = `nats://127.0.0.1:${down}`;
    assert.strictEqual(await roundTrip(url, {
      servers: [`tls://127.0.0.1:${tls.port}`], tls: { ca: cert }, nats: { noRandomize: true, reconnectTimeWait: 50 },
    }), 42);
  });

  it('refuses bad credentials options, coded', async () => {
    for (const credentials of [{ user: '' }, { token: 5 }, { nkey: null }, { creds: '/nonexistent/x.creds' }, {}, 'alice']) {
      await assert.rejects(procwire.connect(`nats://127.0.0.1:${auth.port}`, { subject: 'x', credentials }),
        { code: 'ERR_PROCWIRE_INVALID_ARG' }, JSON.stringify(credentials));
    }
  });
});
