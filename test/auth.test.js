'use strict';
// Shared-secret authentication (lib/auth.js) over real named and TCP
// channels: the handshake, hostile and silent peers, message gating, and the
// key-file helpers.

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { once } = require('events');
const procwire = require('..');
const { sleep: delay, until } = require('./helpers/wait');
const {
  authenticate, resolveSecret, secretFileFor, createSecretFile, readSecretFile, removeSecretFile,
  helloWire: { HELLO, AUTH, AUTH_FAIL, VERSION, computeMac },
} = require('../lib/auth');

const SECRET = 'correct horse battery staple 0123456789';
const WRONG = 'incorrect horse battery staple 9876543210';
const TIMEOUT = { timeout: 10_000 };

// Failing handshakes destroy channels with an error and no 'error' listener,
// which Channel reports as a process warning; they are expected here.
process.removeAllListeners('warning');

function uniqueName() {
  return `auth-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
}

// Resolves once the channel has closed (at once if it already has).
function closed(channel) {
  if (channel.closed) return Promise.resolve();
  return once(channel, 'close');
}

// A server that authenticates every accepted channel with `authOptions` and
// hands out { channel, auth } in accept order. Named servers unless `tcp`.
async function authServer(t, authOptions, { tcp = false, serialization } = {}) {
  // The handshake is driven by hand here, so the built-in one is off.
  const listenOptions = serialization ? { serialization, auth: false } : { auth: false };
  const server = tcp
    ? procwire.listen({ port: 0, host: '127.0.0.1' }, listenOptions)
    : procwire.listen(uniqueName(), listenOptions);
  await server.ready;
  const ready = [];
  const waiting = [];
  const channels = [];
  server.on('channel', (channel) => {
    channels.push(channel);
    // authenticate() runs synchronously in the 'channel' handler, before any
    // of the peer's data can be read, as lib/auth.js asks.
    const entry = { channel, auth: authenticate(channel, { role: 'server', ...authOptions }) };
    entry.auth.catch(() => {});
    if (waiting.length > 0) waiting.shift()(entry); else ready.push(entry);
  });
  const target = tcp ? { port: server.address().port, host: '127.0.0.1' } : server.address().path;
  const clients = [];
  t.after(() => {
    for (const c of clients) c.destroy();
    for (const c of channels) c.destroy();
    server.close();
  });
  return {
    server,
    next: () => (ready.length > 0 ? Promise.resolve(ready.shift()) : new Promise((resolve) => waiting.push(resolve))),
    async connect() {
      const channel = await procwire.connect(target, listenOptions);
      clients.push(channel);
      return channel;
    },
  };
}

async function assertRejectsCode(promise, code) {
  await assert.rejects(promise, (err) => {
    assert.strictEqual(err.code, code, `expected ${code}, got ${err.code}: ${err.message}`);
    return true;
  });
}

// Drives a hand-written peer: collects the internal messages it receives.
function recordInternal(channel) {
  const seen = [];
  const waiters = [];
  channel.on('internalMessage', (m) => {
    seen.push(m);
    for (const w of waiters.splice(0)) w();
  });
  return {
    seen,
    async waitFor(cmd) {
      for (;;) {
        const found = seen.find((m) => m.cmd === cmd);
        if (found) return found;
        await new Promise((resolve) => waiters.push(resolve));
      }
    },
  };
}

for (const transport of ['named', 'tcp']) {
  for (const serialization of ['advanced', 'json']) {
    const label = `${transport}/${serialization}`;

    test(`${label}: both sides authenticate, then user messages flow both ways`, TIMEOUT, async (t) => {
      const s = await authServer(t, { secret: SECRET }, { tcp: transport === 'tcp', serialization });
      const client = await s.connect();
      const clientAuth = authenticate(client, { role: 'client', secret: SECRET });
      const { channel: serverSide, auth: serverAuth } = await s.next();
      await Promise.all([clientAuth, serverAuth]);
      // No handshake listener is left behind.
      for (const ch of [client, serverSide]) {
        assert.strictEqual(ch.listenerCount('internalMessage'), 0);
        assert.strictEqual(ch.listenerCount('message'), 0);
      }
      // Each side sends at once and listens late: the messages wait in the
      // backlog and arrive, in order, once a listener is added.
      client.send({ from: 'client', n: 1 });
      client.send({ from: 'client', n: 2 });
      serverSide.send({ from: 'server', n: 1 });
      await delay(50);
      const toServer = [];
      const toClient = [];
      serverSide.on('message', (m) => toServer.push(m));
      client.on('message', (m) => toClient.push(m));
      client.send({ from: 'client', n: 3 });
      await until(() => toServer.length >= 3 && toClient.length >= 1, 30_000, 'the messages both ways', 5);
      assert.deepStrictEqual(toServer, [{ from: 'client', n: 1 }, { from: 'client', n: 2 }, { from: 'client', n: 3 }]);
      assert.deepStrictEqual(toClient, [{ from: 'server', n: 1 }]);
      assert.ok(client.connected && serverSide.connected);
    });

    test(`${label}: a wrong secret fails on both sides; the server still accepts a correct client`, TIMEOUT, async (t) => {
      const s = await authServer(t, { secret: SECRET }, { tcp: transport === 'tcp', serialization });
      const bad = await s.connect();
      // The check is attached at once: the client may fail before the server.
      const badAuth = assertRejectsCode(authenticate(bad, { role: 'client', secret: WRONG }), 'ERR_PROCWIRE_AUTH_FAILED');
      const first = await s.next();
      await Promise.all([assertRejectsCode(first.auth, 'ERR_PROCWIRE_AUTH_FAILED'), badAuth]);
      await Promise.all([closed(bad), closed(first.channel)]);
      assert.ok(bad.closed && first.channel.closed);

      const good = await s.connect();
      const goodAuth = authenticate(good, { role: 'client', secret: SECRET });
      const second = await s.next();
      await Promise.all([goodAuth, second.auth]);
      const got = once(second.channel, 'message');
      good.send('hello after a failed peer');
      assert.deepStrictEqual(await got, ['hello after a failed peer']);
    });
  }
}

test('a side that is told AUTH_FAIL reports AUTH_FAILED, not just a close', TIMEOUT, async (t) => {
  // Server side: a hand-driven client says hello, then sends a well-formed
  // but wrong proof; the server refuses it and tells the client so.
  const s = await authServer(t, { secret: SECRET });
  const forger = await s.connect();
  const rec = recordInternal(forger);
  forger.send({ cmd: HELLO, v: VERSION, nonce: crypto.randomBytes(32).toString('hex') });
  const { auth } = await s.next();
  await rec.waitFor(HELLO);
  forger.send({ cmd: AUTH, mac: crypto.randomBytes(32).toString('hex') });
  await assertRejectsCode(auth, 'ERR_PROCWIRE_AUTH_FAILED');
  await rec.waitFor(AUTH_FAIL);

  // Client side: a fake server answers the hello with AUTH_FAIL; the real
  // client must report that, not an unexplained close.
  const name = uniqueName();
  const fake = procwire.listen(name, { auth: false });
  await fake.ready;
  const accepted = [];
  fake.on('channel', (ch) => {
    accepted.push(ch);
    ch.on('internalMessage', (m) => { if (m.cmd === HELLO) ch.send({ cmd: AUTH_FAIL }); });
  });
  t.after(() => {
    for (const ch of accepted) ch.destroy();
    fake.close();
  });
  const client = await procwire.connect(name, { auth: false });
  t.after(() => client.destroy());
  await assert.rejects(authenticate(client, { role: 'client', secret: SECRET }), (err) => {
    assert.strictEqual(err.code, 'ERR_PROCWIRE_AUTH_FAILED');
    assert.match(err.message, /peer rejected our authentication/);
    return true;
  });
  assert.ok(client.closed);
});

test('a client that never says hello gets ERR_PROCWIRE_HELLO_TIMEOUT after the bounded timeout', TIMEOUT, async (t) => {
  const s = await authServer(t, { secret: SECRET, timeout: 300 });
  const started = Date.now();
  const silent = await s.connect();
  const rec = recordInternal(silent);
  const { channel, auth } = await s.next();
  await assertRejectsCode(auth, 'ERR_PROCWIRE_HELLO_TIMEOUT');
  const elapsed = Date.now() - started;
  assert.ok(elapsed >= 250 && elapsed < 3000, `timed out after ${elapsed} ms`);
  await Promise.all([closed(channel), closed(silent)]);
  // The silent peer was told why before the close.
  assert.ok(channel.closed && silent.closed);
  assert.deepStrictEqual(rec.seen.map((m) => m.cmd), [AUTH_FAIL]);
});

test('a client that sends user messages instead of a hello never has them delivered', TIMEOUT, async (t) => {
  const s = await authServer(t, { secret: SECRET });
  const hostile = await s.connect();
  for (let i = 0; i < 20; i++) hostile.send({ smuggled: i });
  const { channel, auth } = await s.next();
  await assertRejectsCode(auth, 'ERR_PROCWIRE_AUTH_REQUIRED');
  // A listener added after the failure gets nothing: the channel was
  // destroyed, and its backlog with it.
  const delivered = [];
  channel.on('message', (m) => delivered.push(m));
  await closed(channel);
  await delay(100);
  assert.deepStrictEqual(delivered, []);
  assert.ok(channel.closed);
});

test('user messages sent before the hello are refused even from a peer that knows the secret', TIMEOUT, async (t) => {
  const s = await authServer(t, { secret: SECRET });
  const hostile = await s.connect();
  // Smuggle a message first, then run a correct handshake by hand.
  hostile.send({ smuggled: true });
  const rec = recordInternal(hostile);
  const nonce = crypto.randomBytes(32).toString('hex');
  hostile.send({ cmd: HELLO, v: VERSION, nonce });
  const { channel, auth } = await s.next();
  const delivered = [];
  auth.catch(() => channel.on('message', (m) => delivered.push(m)));
  await assertRejectsCode(auth, 'ERR_PROCWIRE_AUTH_REQUIRED');
  // The server must not have proved itself to a peer that broke protocol
  // first, nor have let the message through.
  await closed(hostile);
  await delay(50);
  assert.deepStrictEqual(delivered, []);
  assert.ok(rec.seen.some((m) => m.cmd === AUTH_FAIL));
});

test('user messages sent right after the client authenticates wait for the server listener', TIMEOUT, async (t) => {
  const s = await authServer(t, { secret: SECRET });
  const client = await s.connect();
  await authenticate(client, { role: 'client', secret: SECRET });
  // The client resolves once it has checked the server's proof; its first
  // message may reach the server before the server's own authenticate()
  // settles, in the same read as the client's proof.
  client.send('first');
  client.send('second');
  const { channel, auth } = await s.next();
  await auth;
  await delay(30);
  const got = [];
  channel.on('message', (m) => got.push(m));
  await until(() => got.length >= 2, 30_000, 'both early messages', 5);
  assert.deepStrictEqual(got, ['first', 'second']);
});

test('the server proves nothing to an unproven client; an old proof replayed fails', TIMEOUT, async (t) => {
  const s = await authServer(t, { secret: SECRET });

  // No oracle: a client that says hello and then a wrong proof never gets
  // the server's proof (which a stranger could test secret guesses against
  // offline), only AUTH_FAIL.
  const stranger = await s.connect();
  const rec = recordInternal(stranger);
  stranger.send({ cmd: HELLO, v: VERSION, nonce: crypto.randomBytes(32).toString('hex') });
  const first = await s.next();
  await rec.waitFor(HELLO);
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.ok(!rec.seen.some((m) => m.cmd === AUTH), 'the server sent its proof before the client proved itself');
  stranger.send({ cmd: AUTH, mac: crypto.randomBytes(32).toString('hex') });
  await assertRejectsCode(first.auth, 'ERR_PROCWIRE_AUTH_FAILED');
  await closed(stranger);
  assert.ok(rec.seen.some((m) => m.cmd === AUTH_FAIL));
  assert.ok(!rec.seen.some((m) => m.cmd === AUTH), 'the server sent its proof to a client that failed');

  // Replay: a proof that was valid for one session (same client nonce) is
  // worthless in the next, because the server's nonce changed.
  const nonce = crypto.randomBytes(32).toString('hex');
  const honest = await s.connect();
  const recHonest = recordInternal(honest);
  honest.send({ cmd: HELLO, v: VERSION, nonce });
  const second = await s.next();
  const serverHello = await recHonest.waitFor(HELLO);
  const recorded = computeMac(Buffer.from(SECRET), 'client', nonce, serverHello.nonce).toString('hex');
  honest.send({ cmd: AUTH, mac: recorded });
  await second.auth;

  const replayer = await s.connect();
  replayer.send({ cmd: HELLO, v: VERSION, nonce });
  replayer.send({ cmd: AUTH, mac: recorded });
  const third = await s.next();
  await assertRejectsCode(third.auth, 'ERR_PROCWIRE_AUTH_FAILED');
});

test('a server that echoes the client\'s nonce back as its own is refused', TIMEOUT, async (t) => {
  // The client side checks the server, too: a fake server that mirrors the
  // client's hello and proof must not be accepted.
  const name = uniqueName();
  const server = procwire.listen(name, { auth: false });
  await server.ready;
  const accepted = [];
  server.on('channel', (ch) => {
    accepted.push(ch);
    ch.on('internalMessage', (m) => ch.send(m));
  });
  t.after(() => {
    for (const ch of accepted) ch.destroy();
    server.close();
  });
  const client = await procwire.connect(name, { auth: false });
  t.after(() => client.destroy());
  await assertRejectsCode(authenticate(client, { role: 'client', secret: SECRET, timeout: 2000 }),
    'ERR_PROCWIRE_AUTH_FAILED');
});

test('a channel that closes mid-handshake rejects with AUTH_FAILED and the reason', TIMEOUT, async (t) => {
  const s = await authServer(t, { secret: SECRET });
  const quitter = await s.connect();
  quitter.send({ cmd: HELLO, v: VERSION, nonce: crypto.randomBytes(32).toString('hex') });
  const { auth } = await s.next();
  quitter.close();
  await assert.rejects(auth, (err) => {
    assert.strictEqual(err.code, 'ERR_PROCWIRE_AUTH_FAILED');
    assert.match(err.message, /closed before authentication completed \(peer-(closed|reset)\)/);
    return true;
  });
});

test('authenticate() validates its arguments', TIMEOUT, async (t) => {
  const s = await authServer(t, { secret: SECRET, timeout: 500 });
  const client = await s.connect();
  const saved = process.env.PROCWIRE_SECRET;
  delete process.env.PROCWIRE_SECRET;
  t.after(() => { if (saved !== undefined) process.env.PROCWIRE_SECRET = saved; });
  await assertRejectsCode(authenticate(client, { role: 'client' }), 'ERR_PROCWIRE_AUTH_REQUIRED');
  await assertRejectsCode(authenticate(client, { role: 'client', secret: 'short' }), 'ERR_PROCWIRE_INVALID_ARG');
  await assertRejectsCode(authenticate(client, { role: 'peer', secret: SECRET }), 'ERR_PROCWIRE_INVALID_ARG');
  await assertRejectsCode(authenticate(client, { role: 'client', secret: SECRET, timeout: -1 }),
    'ERR_PROCWIRE_INVALID_ARG');
  client.on('message', () => {});
  await assertRejectsCode(authenticate(client, { role: 'client', secret: SECRET }), 'ERR_PROCWIRE_INVALID_ARG');
  // None of the refused calls left a listener on the channel.
  assert.strictEqual(client.listenerCount('internalMessage'), 0);
  assert.strictEqual(client.listenerCount('close'), 0);
  client.removeAllListeners('message');
  // The PROCWIRE_SECRET fallback is enough for a full handshake.
  process.env.PROCWIRE_SECRET = SECRET;
  const { auth } = await s.next();
  await Promise.all([authenticate(client, { role: 'client' }), auth]);
});

test('resolveSecret(): option, environment fallback, minimum length', () => {
  const saved = process.env.PROCWIRE_SECRET;
  try {
    delete process.env.PROCWIRE_SECRET;
    assert.strictEqual(resolveSecret({}, 'listen'), null);
    assert.strictEqual(resolveSecret(undefined, 'connect'), null);
    assert.deepStrictEqual(resolveSecret({ secret: SECRET }, 'listen'), Buffer.from(SECRET));
    const raw = crypto.randomBytes(16);
    assert.deepStrictEqual(resolveSecret({ secret: raw }, 'listen'), raw);
    assert.throws(() => resolveSecret({ secret: crypto.randomBytes(15) }, 'listen'),
      { code: 'ERR_PROCWIRE_INVALID_ARG', message: /listen options\.secret must be at least 16 bytes/ });
    assert.throws(() => resolveSecret({ secret: 42 }, 'connect'), { code: 'ERR_PROCWIRE_INVALID_ARG' });
    process.env.PROCWIRE_SECRET = SECRET;
    assert.deepStrictEqual(resolveSecret({}, 'connect'), Buffer.from(SECRET));
    assert.deepStrictEqual(resolveSecret({ secret: WRONG }, 'connect'), Buffer.from(WRONG));
    process.env.PROCWIRE_SECRET = 'tiny';
    assert.throws(() => resolveSecret({}, 'connect'), { code: 'ERR_PROCWIRE_INVALID_ARG', message: /PROCWIRE_SECRET/ });
  } finally {
    if (saved === undefined) delete process.env.PROCWIRE_SECRET; else process.env.PROCWIRE_SECRET = saved;
  }
});

// ---- key files -------------------------------------------------------------

function tempSocketPath(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-auth-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, 'server.sock');
}

test('createSecretFile() writes a fresh 0600 key that readSecretFile() returns', TIMEOUT, (t) => {
  const sock = tempSocketPath(t);
  assert.strictEqual(secretFileFor(sock), `${sock}.key`);
  const oldMask = process.umask(0o000);
  let secret;
  try {
    secret = createSecretFile(sock);
  } finally {
    process.umask(oldMask);
  }
  assert.match(secret, /^[0-9a-f]{64}$/);
  const st = fs.lstatSync(secretFileFor(sock));
  assert.ok(st.isFile());
  assert.strictEqual(st.mode & 0o777, 0o600);
  assert.strictEqual(st.uid, process.getuid());
  assert.strictEqual(readSecretFile(sock), secret);
  // Exclusive create: an existing file is neither reused nor overwritten.
  assert.throws(() => createSecretFile(sock), { code: 'EEXIST' });
  assert.strictEqual(readSecretFile(sock), secret);
  // Two servers never share a key.
  const other = `${sock}-2`;
  assert.notStrictEqual(createSecretFile(other), secret);
  removeSecretFile(sock);
  assert.strictEqual(fs.existsSync(secretFileFor(sock)), false);
  removeSecretFile(sock);  // missing is fine
  assert.throws(() => readSecretFile(sock), { code: 'ERR_PROCWIRE_AUTH_FAILED', message: /ENOENT/ });
});

test('readSecretFile() refuses a group- or world-accessible key file', TIMEOUT, (t) => {
  const sock = tempSocketPath(t);
  createSecretFile(sock);
  for (const mode of [0o640, 0o604, 0o660, 0o602]) {
    fs.chmodSync(secretFileFor(sock), mode);
    assert.throws(() => readSecretFile(sock), (err) => {
      assert.strictEqual(err.code, 'ERR_PROCWIRE_AUTH_FAILED');
      assert.match(err.message, new RegExp(`mode 0${mode.toString(8)}.*must be 0600`));
      return true;
    });
  }
  fs.chmodSync(secretFileFor(sock), 0o400);
  assert.match(readSecretFile(sock), /^[0-9a-f]{64}$/);
});

test('key files: symlinks are neither written through nor read', TIMEOUT, (t) => {
  const sock = tempSocketPath(t);
  const dir = path.dirname(sock);
  // A target the attacker would like overwritten, or would like us to trust.
  const target = path.join(dir, 'target');
  fs.writeFileSync(target, 'a'.repeat(64), { mode: 0o600 });
  fs.symlinkSync(target, secretFileFor(sock));
  assert.throws(() => createSecretFile(sock), { code: 'EEXIST' });
  assert.strictEqual(fs.readFileSync(target, 'utf8'), 'a'.repeat(64));
  assert.throws(() => readSecretFile(sock), { code: 'ERR_PROCWIRE_AUTH_FAILED', message: /symbolic link/ });
  // A dangling symlink is refused by the exclusive create as well.
  const sock2 = path.join(dir, 'dangling.sock');
  fs.symlinkSync(path.join(dir, 'nowhere'), secretFileFor(sock2));
  assert.throws(() => createSecretFile(sock2), { code: 'EEXIST' });
  assert.strictEqual(fs.existsSync(path.join(dir, 'nowhere')), false);
});

test('readSecretFile() refuses directories, FIFOs, short keys and files of other users', TIMEOUT, (t) => {
  const sock = tempSocketPath(t);
  const dir = path.dirname(sock);
  fs.mkdirSync(secretFileFor(sock), { mode: 0o700 });
  assert.throws(() => readSecretFile(sock), { code: 'ERR_PROCWIRE_AUTH_FAILED', message: /not a regular file/ });

  // A FIFO must be refused without blocking on its open.
  const fifoSock = path.join(dir, 'fifo.sock');
  const mk = childProcess.spawnSync('mkfifo', ['-m', '600', secretFileFor(fifoSock)]);
  if (mk.status === 0) {
    assert.throws(() => readSecretFile(fifoSock), { code: 'ERR_PROCWIRE_AUTH_FAILED', message: /not a regular file/ });
  }

  const shortSock = path.join(dir, 'short.sock');
  fs.writeFileSync(secretFileFor(shortSock), 'abc\n', { mode: 0o600 });
  assert.throws(() => readSecretFile(shortSock), { code: 'ERR_PROCWIRE_AUTH_FAILED', message: /shorter/ });

  // Owner check: only root can give a file away to test it.
  if (process.getuid() !== 0) {
    t.diagnostic('owner check skipped: needs root to chown a file to another uid');
    return;
  }
  const foreignSock = path.join(dir, 'foreign.sock');
  createSecretFile(foreignSock);
  fs.chownSync(secretFileFor(foreignSock), 65534, 65534);
  assert.throws(() => readSecretFile(foreignSock), {
    code: 'ERR_PROCWIRE_AUTH_FAILED', message: /owned by uid 65534, not by this process's uid 0/,
  });
});

test('a key file carries the secret from a server to a client', TIMEOUT, async (t) => {
  const name = uniqueName();
  const server = procwire.listen(name, { auth: false });
  await server.ready;
  const sock = server.address().path;
  const serverSecret = createSecretFile(sock);
  const accepted = [];
  server.on('channel', (ch) => {
    accepted.push({ ch, auth: authenticate(ch, { role: 'server', secret: serverSecret }) });
  });
  t.after(() => {
    for (const { ch } of accepted) ch.destroy();
    server.close();
    removeSecretFile(sock);
  });
  const client = await procwire.connect(name, { auth: false });
  t.after(() => client.destroy());
  await authenticate(client, { role: 'client', secret: readSecretFile(sock) });
  await until(() => accepted.length > 0, 30_000, 'the accepted channel', 5);
  await accepted[0].auth;
});
