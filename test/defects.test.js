'use strict';
// Defects from an authenticated or same-user peer and from the API (issue
// 11): each case failed on the code before the fix. Peers are real
// processes or real sockets; nothing is mocked.

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const { once } = require('events');
const fs = require('fs');
const os = require('os');
const path = require('path');
const procwire = require('..');
const { binding } = require('../lib/native');
const { namedPair, uniqueName } = require('./helpers/pair');
const { sleep, withTimeout, until } = require('./helpers/wait');
const { kWriter, kInbox, kReader } = require('../lib/channel/symbols');
const { HOLD_BACKLOG } = require('../lib/channel/reader');

const TIMEOUT = { timeout: 20000 };
const native = procwire.native;

// 'close' with its arguments; events.once would reject on the 'error' that
// precedes it.
const closeOf = (channel) => new Promise((resolve) => channel.once('close', (...args) => resolve(args)));

async function pairWith(serverOptions, clientOptions) {
  const name = uniqueName();
  const server = procwire.listen(name, serverOptions);
  await server.ready;
  const accepted = once(server, 'channel');
  const client = await procwire.connect(name, clientOptions);
  const [serverSide] = await accepted;
  return { server, client, serverSide, close() { client.destroy(); serverSide.destroy(); server.close(); } };
}

for (const [what, ack] of [['NaN bytes', { n: 1, bytes: NaN }], ['Infinity bytes', { n: 1, bytes: Infinity }],
  ['a negative count', { n: -5, bytes: 0 }], ['more than was sent', { n: 1, bytes: 4096 }],
  ['a string', { n: '1', bytes: 0 }]]) {
  test(`a forged segment acknowledgement with ${what} closes the channel as a protocol error`, TIMEOUT, async (t) => {
    const p = await namedPair();
    t.after(() => p.close());
    p.serverSide.on('error', () => {});
    const closed = closeOf(p.serverSide);
    p.client[kWriter].sendControl({ cmd: 'NODE_PROCWIRE_SEGACK', ...ack });
    const [reason, err] = await withTimeout(closed, 30_000, 'close');
    assert.strictEqual(reason, 'protocol-error');
    assert.strictEqual(err.code, 'ERR_PROCWIRE_PROTOCOL');
    assert.ok(err instanceof procwire.errors.ProtocolError);
  });
}

test('backpressure still holds after honest acknowledgements (accounting intact)', TIMEOUT, async (t) => {
  const p = await namedPair({ outOfLine: 'always', highWaterMark: 1024 * 1024 });
  t.after(() => p.close());
  const got = [];
  p.serverSide.on('message', (m) => got.push(m));
  for (let i = 0; i < 20; i++) p.client.send(Buffer.alloc(64 * 1024, i));
  await until(() => got.length >= 20, 10000, 'the 20 messages');
  await sleep(50);
  assert.strictEqual(p.client.writableLength, 0);
  assert.strictEqual(p.client.send(Buffer.alloc(2 * 1024 * 1024)), false, 'send() no longer reports backpressure');
});

test('a shared-memory segment over the receiver\'s maxMessageSize is refused; the stream goes on', TIMEOUT, async (t) => {
  if (!native) return t.skip('segments need the addon');
  const p = await pairWith({ maxMessageSize: 1024 * 1024 }, {});
  t.after(() => p.close());
  const errors = [];
  const got = [];
  p.serverSide.on('messageerror', (err) => errors.push(err));
  p.serverSide.on('message', (m) => got.push(m));
  // Wait for the capability notice so the big buffer goes out of line.
  await until(() => p.client.stats().outOfLine.enabled, 10000, 'the capability notice', 5);
  p.client.send({ big: Buffer.alloc(2 * 1024 * 1024, 1) });
  p.client.send({ after: true });
  await until(() => got.length >= 1, 10000, 'the message after the refused one');
  assert.deepStrictEqual(got, [{ after: true }]);
  assert.strictEqual(errors.length, 1);
  assert.strictEqual(errors[0].code, 'ERR_PROCWIRE_SEGMENT');
  assert.match(errors[0].message, /maxMessageSize/);
  assert.strictEqual(p.client.stats().outOfLine.messagesOut, 1);
});

test('send() refuses a message over maxMessageSize before writing a byte; the channel goes on', TIMEOUT, async (t) => {
  const p = await namedPair({ maxMessageSize: 64 * 1024, outOfLine: 'never' });
  t.after(() => p.close());
  const got = [];
  p.serverSide.on('message', (m) => got.push(m));
  const before = p.client.stats().bytesOut;
  assert.throws(() => p.client.send({ big: 'x'.repeat(100 * 1024) }),
    (err) => err.code === 'ERR_PROCWIRE_MESSAGE_TOO_LARGE' && /nothing was sent/.test(err.message));
  assert.throws(() => p.client.send({ b: Buffer.alloc(100 * 1024) }, { transfer: [] }),
    (err) => err.code === 'ERR_PROCWIRE_MESSAGE_TOO_LARGE');
  const owned = new ArrayBuffer(100 * 1024);
  assert.throws(() => p.client.send({ owned }, { transfer: [owned] }), (err) => err.code === 'ERR_PROCWIRE_MESSAGE_TOO_LARGE');
  assert.strictEqual(owned.byteLength, 100 * 1024, 'a refused transfer must not detach');
  p.client.send({ small: 1 });
  await until(() => got.length >= 1, 10000, 'the small message', 5);
  assert.deepStrictEqual(got, [{ small: 1 }]);
  assert.ok(p.client.connected && p.serverSide.connected);
  assert.ok(p.client.stats().bytesOut - before < 1024);
});

// 100 MiB through one process: a starved machine needs more than TIMEOUT.
test('the no-listener backlog is bounded in bytes: reading pauses, nothing is dropped', { timeout: 60_000 }, async (t) => {
  const p = await namedPair({ outOfLine: 'never', maxQueuedBytes: 2 ** 31 });
  t.after(() => p.close());
  const chunk = Buffer.alloc(1024 * 1024, 7);
  for (let i = 0; i < 100; i++) p.client.send({ i, chunk });
  // Reading stops at the backlog's byte bound; a loaded machine may take a
  // while to read that far, so the wait is for the stop, not a fixed time.
  await until(() => p.serverSide[kReader].isHeld(HOLD_BACKLOG), 20_000, 'reading to stop at the backlog bound', 20);
  // Stopped, it stays stopped: nothing more comes in meanwhile.
  await sleep(300);
  const held = p.serverSide[kInbox].backlog.length;
  assert.ok(held < 100, `all ${held} MiB were taken into the backlog`);
  assert.ok(held >= 32, `only ${held} messages were read`);
  const got = [];
  p.serverSide.on('message', (m) => got.push(m.i));
  await until(() => got.length >= 100, 30_000, 'the 100 backlogged messages', 20);
  assert.deepStrictEqual(got, Array.from({ length: 100 }, (_, i) => i));
});

test('concurrent responder calls are bounded; the excess waits in order, nothing is dropped', TIMEOUT, async (t) => {
  const p = await pairWith({ maxConcurrentRequests: 10 }, {});
  t.after(() => p.close());
  let running = 0;
  let peak = 0;
  const order = [];
  p.serverSide.respond(async (v) => {
    order.push(v);
    running++;
    peak = Math.max(peak, running);
    await sleep(5);
    running--;
    return v * 2;
  });
  const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => p.client.request(i, { timeout: 10000 })));
  assert.deepStrictEqual(answers, Array.from({ length: 200 }, (_, i) => i * 2));
  assert.strictEqual(peak, 10);
  assert.deepStrictEqual(order, Array.from({ length: 200 }, (_, i) => i));
});

test('small received views do not pin the 256 KiB read block', TIMEOUT, async (t) => {
  if (!native) return t.skip('read blocks are the addon\'s');
  const p = await namedPair();
  t.after(() => p.close());
  const kept = [];
  p.serverSide.on('message', (m) => kept.push(m.b));
  for (let i = 0; i < 2000; i++) {
    p.client.send({ b: Buffer.from([i & 0xff]) });
    if (i % 100 === 99) await sleep(2);
  }
  await until(() => kept.length >= 2000, 15000, 'the 2000 small messages');
  const blocks = new Set(kept.map((b) => b.buffer));
  const pinned = [...blocks].filter((ab) => ab.byteLength >= 256 * 1024).length;
  assert.strictEqual(pinned, 0, `${pinned} read blocks are pinned by one-byte Buffers`);
  assert.ok(kept.every((b, i) => b.length === 1 && b[0] === (i & 0xff)));
});

test('a frame cut off by the peer closes with reason "truncated" and says how many bytes were lost', TIMEOUT, async (t) => {
  // Without rings: the server answers the client's capabilities with a ring
  // set-up frame, and writing it to a client that has already closed fails
  // (peer-reset) before the read that would see the cut-off frame.
  const p = await namedPair({ auth: false, rings: 'never' });
  t.after(() => p.close());
  p.serverSide.on('error', () => {});
  const closed = closeOf(p.serverSide);
  const partial = Buffer.alloc(4 + 10);
  partial.writeUInt32BE(1000);
  p.client[kWriter].sendRaw(partial);
  p.client.close();
  const [reason, err] = await withTimeout(closed, 30_000, 'close');
  assert.strictEqual(reason, 'truncated');
  assert.strictEqual(err.code, 'ERR_PROCWIRE_FRAME_TRUNCATED');
  assert.match(err.message, /14 bytes/);
});

test('connect() to a unix server whose backlog is full rejects with a connect error, never resolves', TIMEOUT, async (t) => {
  if (!native) return t.skip('needs the addon\'s listen without accept');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-backlog-'));
  const file = path.join(dir, 's.sock');
  const fd = binding.listenUnix(file, false, 1);
  assert.ok(fd >= 0);
  const opened = [];
  t.after(() => {
    for (const ch of opened) ch.destroy();
    binding.closeFd(fd);
    fs.rmSync(dir, { recursive: true, force: true });
  });
  // Nobody accepts: the backlog fills after a couple of connections.
  let refused = null;
  for (let i = 0; i < 16 && refused === null; i++) {
    try {
      const ch = await withTimeout(procwire.connect({ path: file }, { auth: false }), 30_000, 'connect settles');
      ch.on('error', () => {});
      opened.push(ch);
    } catch (err) {
      refused = err;
    }
  }
  assert.ok(refused, 'connect() never failed although nobody accepts');
  assert.strictEqual(refused.code, 'ERR_PROCWIRE_CONNECT_FAILED');
  assert.strictEqual(refused.syscallCode, 'EAGAIN');
  assert.ok(opened.length <= 3, `${opened.length} connects resolved on a full backlog`);
});

test('transfer never detaches Node\'s Buffer pool or a shared view, here and in the fallback', TIMEOUT, async (t) => {
  const script = `
    const procwire = require(${JSON.stringify(path.join(__dirname, '..'))});
    (async () => {
      const name = 'x-' + process.pid;
      const server = procwire.listen(name, {});
      await server.ready;
      const client = await procwire.connect(name, {});
      const small = Buffer.from('hello');
      const neighbour = Buffer.from('world');
      client.send({ small }, { transfer: [small.buffer] });
      const part = new Uint8Array(new ArrayBuffer(64), 8, 8);
      client.send({ part }, { transfer: [part] });
      const owned = Buffer.alloc(100 * 1024, 3);
      client.send({ owned }, { transfer: [owned] });
      const after = Buffer.allocUnsafe(16).fill(1);
      const out = {
        neighbour: neighbour.toString(), small: small.toString(), part: part.buffer.byteLength,
        owned: owned.buffer.byteLength, after: after.length, from: Buffer.from('again').toString(),
      };
      console.log(JSON.stringify(out));
      client.destroy();
      server.close();
    })().catch((err) => { console.log(JSON.stringify({ error: String(err && err.stack), code: err && err.code })); });`;
  for (const env of [{}, { PROCWIRE_FORCE_FALLBACK: '1' }]) {
    const r = childProcess.spawnSync(process.execPath, ['-e', script], {
      env: { ...process.env, ...env }, encoding: 'utf8', timeout: 15000,
    });
    const line = r.stdout.trim().split('\n').pop();
    assert.deepStrictEqual(JSON.parse(line), {
      neighbour: 'world', small: 'hello', part: 64, owned: 0, after: 16, from: 'again',
    }, `with ${JSON.stringify(env)}: ${r.stderr}`);
  }
});

test('no exported constructor or call aborts the process on bad arguments', TIMEOUT, async () => {
  const script = `
    const procwire = require(${JSON.stringify(path.join(__dirname, '..'))});
    const codes = [];
    const attempts = [
      () => new procwire.Channel(),
      () => new procwire.Channel(require('fs').openSync('/dev/null'), {}),
      () => new procwire.Channel(1000, {}),
      () => new procwire.Channel(-1, {}),
      () => new procwire.Channel(2 ** 40, {}),
      () => new procwire.Channel('3', {}),
      () => new procwire.Channel(1, null),
      () => new procwire.Framer({ maxMessageSize: -1 }),
      () => new procwire.Framer({ serialization: 'nope' }),
      () => procwire.alloc(-1),
      () => procwire.codec.advanced.decode(42),
      () => new procwire.Server(),
      () => new procwire.Server('x', null),
      () => new procwire.Framer().push(42),
    ];
    for (const f of attempts) {
      try { f(); codes.push('no error'); } catch (err) { codes.push(err.code || String(err)); }
    }
    console.log(JSON.stringify(codes));`;
  const r = childProcess.spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 15000 });
  assert.strictEqual(r.status, 0, `the process died: ${r.signal} ${r.stderr}`);
  const codes = JSON.parse(r.stdout.trim());
  for (const code of codes) assert.match(code, /^ERR_PROCWIRE_/, `uncoded: ${codes}`);
});

for (const [what, env] of [['native', {}], ['fallback', { PROCWIRE_FORCE_FALLBACK: '1' }]]) {
test(`a procwire child (${what}) that pauses its channel from a message listener stays alive`, TIMEOUT, async (t) => {
  const child = procwire.fork(path.join(__dirname, 'fixtures', 'paused-child.js'), [], {
    child: 'procwire', stdio: ['ignore', 'pipe', 'inherit', 'ipc'], env: { ...process.env, ...env },
  });
  t.after(() => { if (child.exitCode === null) child.kill('SIGKILL'); });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.send({ hello: 1 });
  await until(() => out.includes('got'), 10000, 'the child\'s "got" line');
  await sleep(1000);
  assert.strictEqual(child.exitCode, null, 'the paused child exited');
  child.disconnect();
  const [code] = await withTimeout(once(child, 'exit'), 30_000, 'child exits after disconnect');
  assert.strictEqual(code, 0);
});
}

test('a resizable ArrayBuffer whose maxByteLength exceeds maxMessageSize is a decode error, not a reservation',
  TIMEOUT, async (t) => {
    if (!native) return t.skip('the fallback decodes with Node\'s own deserializer');
    const p = await namedPair({ auth: false, outOfLine: 'never' });
    t.after(() => p.close());
    const errors = [];
    const got = [];
    p.serverSide.on('messageerror', (err) => errors.push(err));
    p.serverSide.on('message', (m) => got.push(m));
    // { r: <resizable ArrayBuffer, 0 bytes, maxByteLength 32 GiB> } in V8's
    // wire format: 20 bytes that would make V8 reserve 32 GiB.
    const payload = Buffer.from([0xff, 0x0f, 0x6f, 0x22, 0x01, 0x72, 0x7e, 0x00, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01,
      0x7b, 0x01]);
    const frame = Buffer.concat([Buffer.alloc(4), payload]);
    frame.writeUInt32BE(payload.length);
    for (let i = 0; i < 20; i++) p.client[kWriter].sendRaw(frame);
    // One within the limit still decodes.
    p.client.send({ small: new ArrayBuffer(8, { maxByteLength: 1024 }) });
    await until(() => got.length >= 1, 10000, 'the resizable buffer within the limit');
    assert.strictEqual(errors.length, 20);
    for (const err of errors) {
      assert.strictEqual(err.code, 'ERR_PROCWIRE_DECODE');
      assert.match(err.message, /maxByteLength/);
    }
    assert.strictEqual(got[0].small.maxByteLength, 1024);
  });

// The raw write path (used to inject hostile bytes in these tests) checks its
// arguments and the channel's state in JavaScript, so the native CHECKs behind
// it can never fire: a closed channel or a bad argument is a coded error.
test('raw writes on a closed channel or with bad arguments are coded errors, never an abort', TIMEOUT, async (t) => {
  const p = await namedPair({ auth: false, rings: 'never' });
  t.after(() => p.close());
  assert.throws(() => p.client[kWriter].sendRaw('not bytes'), { code: 'ERR_PROCWIRE_INVALID_ARG' });
  assert.throws(() => p.client[kWriter].sendRaw(Buffer.alloc(4), [-1]), { code: 'ERR_PROCWIRE_INVALID_ARG' });
  assert.throws(() => p.client[kWriter].sendRaw(Buffer.alloc(4), ['3']), { code: 'ERR_PROCWIRE_INVALID_ARG' });
  p.client.close();
  assert.throws(() => p.client[kWriter].sendRaw(Buffer.alloc(4)), { code: 'ERR_PROCWIRE_CHANNEL_CLOSED' });
  await sleep(50);
  assert.throws(() => p.client[kWriter].sendRaw(Buffer.alloc(4)), { code: 'ERR_PROCWIRE_CHANNEL_CLOSED' });
});
