'use strict';
// Large messages out of line: sealed memfd segments passed with SCM_RIGHTS
// between procwire peers; inline everywhere else.

const test = require('node:test');
const assert = require('node:assert');
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { once } = require('events');
const procwire = require('..');
const { kWriter } = require('../lib/channel/symbols');

// Bytes of this process's mappings of procwire's segments (not its rings).
function segmentMappingBytes() {
  let bytes = 0;
  for (const line of fs.readFileSync('/proc/self/maps', 'utf8').split('\n')) {
    if (!/\/memfd:procwire \(deleted\)$/.test(line)) continue;
    const [from, to] = line.split(' ')[0].split('-').map((x) => BigInt(`0x${x}`));
    bytes += Number(to - from);
  }
  return bytes;
}

if (process.argv[2] === 'child') {
  // A procwire child that echoes, reports what it received, mutates
  // received buffers (they are its own copy-on-write pages), and counts fds.
  const ch = procwire.parent;
  ch.on('message', (m) => {
    if (m && m.op === 'fds') { ch.send({ fds: fs.readdirSync('/proc/self/fd').length }); return; }
    if (m && m.op === 'segment-maps') {
      if (typeof global.gc === 'function') global.gc();
      ch.send({ bytes: segmentMappingBytes() });
      return;
    }
    if (m && m.op === 'sum') {
      let sum = 0;
      for (let i = 0; i < m.data.length; i += 997) sum += m.data[i];
      m.data[0] ^= 0xff;  // must not reach the sender's memory
      ch.send({ op: 'sum', sum, length: m.data.length });
      return;
    }
    ch.send(m);
  });
  return;
}

const MiB = 1 << 20;


function shmEntries() {
  try { return fs.readdirSync('/dev/shm').sort(); } catch { return []; }
}

const { namedPair, uniqueName } = require('./helpers/pair');
const { fdSnapshot, fdsOpenedSince } = require('./helpers/fds');
const { withTimeout, until, exitOf, unlessExited, killChild } = require('./helpers/wait');
const { messageWithin } = require('./helpers/messages');

// Every test is bounded, and so is every wait in it: a wait that ended only
// with the test's time limit would skip the finally that closes the test's
// channels and children, and they would keep this file running.
// WAIT bounds a wait for a condition, not how long it should take: 5 s ran
// out on a loaded 2-core machine (a fresh clone's npm test beside another
// job), while a condition that holds ends the wait at once.
const TIMEOUT = { timeout: 90_000 };
const WAIT = 30_000;

// The next message on `channel`, or a failure naming `what`.
function nextOf(channel, what) {
  return messageWithin(channel, WAIT, what);
}

function sumEvery(buf) {
  let sum = 0;
  for (let i = 0; i < buf.length; i += 997) sum += buf[i];
  return sum;
}

test('several large views in one message arrive through shared memory, sharing their ArrayBuffer', TIMEOUT, async () => {
  const p = await namedPair();
  try {
    const ab = new ArrayBuffer(8 * MiB);
    const bytes = new Uint8Array(ab);
    crypto.randomFillSync(bytes);
    const a = new Uint8Array(ab, 0, 4 * MiB);
    const b = new Float64Array(ab, 4 * MiB, (2 * MiB) / 8);
    const c = Buffer.from(ab, 6 * MiB, 2 * MiB);
    const other = crypto.randomBytes(3 * MiB);
    p.client.send({ a, b, c, other, small: new Uint8Array([1, 2, 3]) });
    const m = await nextOf(p.serverSide, 'the message');
    assert.strictEqual(m.a.buffer, m.b.buffer, 'views of one ArrayBuffer share one on arrival');
    assert.strictEqual(m.a.buffer, m.c.buffer);
    assert.ok(Buffer.isBuffer(m.c) && m.b instanceof Float64Array && m.a instanceof Uint8Array);
    assert.deepStrictEqual(Buffer.from(m.a.buffer), Buffer.from(ab));
    assert.ok(m.other.equals(other));
    assert.deepStrictEqual(m.small, new Uint8Array([1, 2, 3]));
    const s = p.client.stats().outOfLine;
    assert.strictEqual(s.enabled, true);
    assert.strictEqual(s.messagesOut, 1);
    assert.strictEqual(s.bytesOut, 8 * MiB + 3 * MiB, 'one segment per buffer, the small view inline');
    assert.strictEqual(p.serverSide.stats().outOfLine.bytesIn, 11 * MiB);
  } finally {
    p.close();
  }
});

test('offsets and odd lengths: unaligned views are copied out of the segment, aligned ones borrow it', TIMEOUT, async () => {
  const p = await namedPair({ outOfLine: 'always' });
  try {
    const big = crypto.randomBytes(2 * MiB + 3);
    const ab = big.buffer.slice(big.byteOffset, big.byteOffset + big.length);
    const odd = new Uint8Array(ab, 1, 2 * MiB + 1);
    const dv = new DataView(ab, 3, 1000);
    const aligned = new Uint16Array(ab, 2, 1000);
    p.client.send({ odd, dv, aligned, empty: new Uint8Array(0) });
    const m = await nextOf(p.serverSide, 'the message');
    assert.deepStrictEqual(Buffer.from(m.odd.buffer, m.odd.byteOffset, m.odd.byteLength), Buffer.from(odd));
    assert.deepStrictEqual(Buffer.from(m.dv.buffer, m.dv.byteOffset, m.dv.byteLength), Buffer.from(ab, 3, 1000));
    assert.deepStrictEqual(Array.from(m.aligned), Array.from(aligned));
    assert.strictEqual(m.empty.length, 0);
  } finally {
    p.close();
  }
});

test('the receiver never sees writes the sender makes after send(); its own writes stay its own', TIMEOUT, async () => {
  const child = procwire.fork(__filename, ['child'], { child: 'procwire', serialization: 'advanced' });
  // Taken now: a child that died before the finally would never emit 'exit'
  // again, and a wait on the child's answer fails at once if it died.
  const exited = exitOf(child);
  try {
    const ch = child.channel;
    // One round trip first: large views go out of line only once the child
    // has said it can take segments.
    ch.send({ op: 'fds' });
    await unlessExited(nextOf(ch, 'the first answer'), exited, 'the first answer');
    const data = Buffer.alloc(16 * MiB, 1);
    const expected = sumEvery(data);
    ch.send({ op: 'sum', data });
    data.fill(2);  // after send: must not be visible in the segment
    const r = await unlessExited(nextOf(ch, 'the sum'), exited, 'the sum');
    assert.strictEqual(r.sum, expected);
    assert.strictEqual(r.length, 16 * MiB);
    assert.strictEqual(data[0], 2, 'the child\'s write to its copy did not reach us');
    assert.strictEqual(ch.stats().outOfLine.messagesOut, 1);
  } finally {
    await killChild(child, exited);
  }
});

test('transfer: procwire.alloc() buffers move without copying and are detached from the sender', TIMEOUT, async () => {
  const p = await namedPair();
  try {
    const buf = procwire.alloc(32 * MiB);
    buf.fill(7);
    const view = new Uint32Array(buf.buffer, 0, 4);
    const t0 = process.hrtime.bigint();
    p.client.send({ buf, view }, { transfer: [buf] });
    const sendMicros = Number(process.hrtime.bigint() - t0) / 1e3;
    assert.strictEqual(buf.length, 0, 'sender\'s Buffer is detached');
    assert.strictEqual(buf.buffer.byteLength, 0);
    const m = await nextOf(p.serverSide, 'the transferred buffer');
    assert.strictEqual(m.buf.length, 32 * MiB);
    assert.strictEqual(m.buf[32 * MiB - 1], 7);
    assert.strictEqual(m.view.buffer, m.buf.buffer, 'views of the transferred buffer share it');
    assert.ok(sendMicros < 1_000_000, 'bounded');
    // A detached buffer cannot be transferred again.
    assert.throws(() => p.client.send({ buf }, { transfer: [buf] }), { code: 'ERR_PROCWIRE_TRANSFER' });
    // A non-alloc buffer can be transferred too: copied once into a segment, then detached.
    const plain = new Uint8Array(3 * MiB).fill(9);
    p.client.send({ plain }, { transfer: [plain.buffer] });
    assert.strictEqual(plain.byteLength, 0);
    const m2 = await nextOf(p.serverSide, 'the plain buffer');
    assert.strictEqual(m2.plain[3 * MiB - 1], 9);
  } finally {
    p.close();
  }
});

test('big transferred segments are unmapped on both sides once done with (by the background thread)', TIMEOUT, async () => {
  const child = procwire.fork(__filename, ['child'], { child: 'procwire', serialization: 'advanced', execArgv: ['--expose-gc'] });
  const exited = exitOf(child);
  const ch = child.channel;
  const answer = (what) => unlessExited(nextOf(ch, what), exited, what);
  try {
    ch.send({ op: 'segment-maps' });
    const { bytes: childBefore } = await answer('the child\'s mappings before');
    const before = segmentMappingBytes();
    // 4 MiB each: past the 1 MiB from which both ends leave the teardown to
    // their background thread.
    for (let i = 0; i < 8; i++) {
      const data = procwire.alloc(4 * MiB);
      data.fill(i + 1);
      ch.send({ op: 'sum', data }, { transfer: [data] });
      const { sum, length } = await answer('a transfer\'s sum');
      assert.strictEqual(length, 4 * MiB);
      assert.strictEqual(sum, (i + 1) * Math.ceil(4 * MiB / 997));
    }
    // The sender's mappings go when send() detaches them; the receiver's
    // when its collector frees the Buffers. Neither may stay behind. The
    // sender's count may also fall below `before`: an earlier test's
    // received segments are unmapped whenever this process collects them.
    await until(() => segmentMappingBytes() <= before, WAIT, 'the sender\'s mappings to go');
    await until(async () => {
      ch.send({ op: 'segment-maps' });
      return (await answer('the child\'s mappings')).bytes === childBefore;
    }, WAIT, 'the receiver\'s mappings to go', 50);
  } finally {
    await killChild(child, exited);
  }
});

test('TCP and plain Node children get the same bytes inline; transfer still detaches', TIMEOUT, async (t) => {
  const secret = crypto.randomBytes(32);
  const server = procwire.listen({ port: 0 }, { secret });
  const channels = [];
  t.after(() => {
    for (const ch of channels) ch.destroy();
    server.close();
  });
  await server.ready;
  const accepted = once(server, 'channel');
  const client = await procwire.connect({ port: server.address().port }, { secret });
  channels.push(client);
  const [s] = await withTimeout(accepted, WAIT, 'the accepted channel');
  channels.push(s);
  const data = crypto.randomBytes(2 * MiB);
  const copy = Buffer.from(data);
  client.send({ data }, { transfer: [data] });
  assert.strictEqual(data.length, 0);
  const m = await nextOf(s, 'the message over TCP');
  assert.ok(m.data.equals(copy));
  assert.strictEqual(client.stats().outOfLine.enabled, false);
  assert.strictEqual(client.stats().outOfLine.messagesOut, 0);
  client.destroy();
  s.destroy();
  server.close();

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pw-shm-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'echo.js');
  // The child does not disconnect itself: Node's disconnect() drops what it
  // has not yet written, and 4 MiB takes more than one write.
  fs.writeFileSync(file, "process.on('message', (m) => process.send(m));");
  const child = procwire.fork(file, { serialization: 'advanced', child: 'node' });
  const exited = exitOf(child);
  // Disconnected below when the test passes; killed here when it fails first.
  t.after(() => killChild(child, exited));
  const big = crypto.randomBytes(4 * MiB);
  child.send({ big });
  const echo = await unlessExited(nextOf(child, 'the plain child\'s echo'), exited, 'the echo');
  assert.ok(Buffer.isBuffer(echo.big) && echo.big.equals(big));
  assert.strictEqual(child.channel.stats().outOfLine.enabled, false, 'a plain child never gets segments');
  child.disconnect();
  await withTimeout(exited, WAIT, 'the plain child to exit');
});

test('a segment that is not a sealed memfd is rejected with a coded error; the stream goes on', TIMEOUT, async () => {
  const p = await namedPair();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pw-shm-'));
  try {
    const errors = [];
    p.serverSide.on('messageerror', (err) => errors.push(err.code));
    // A regular file where a sealed memfd belongs.
    const file = path.join(dir, 'not-a-memfd');
    fs.writeFileSync(file, Buffer.alloc(4096));
    const fd = fs.openSync(file, 'r+');
    // An unsealed memfd: a procwire.alloc() segment before any transfer.
    const unsealed = procwire.alloc(4096);
    const memfd = fs.readdirSync('/proc/self/fd').map(Number)
      .find((n) => { try { return fs.readlinkSync(`/proc/self/fd/${n}`).startsWith('/memfd:procwire'); } catch { return false; } });
    assert.ok(memfd !== undefined && unsealed.length === 4096);
    const control = Buffer.from([0, 0, 0, 2, 0xfe, 1]);
    // A frame referring to segment 0 as a Uint8Array of 16 bytes: ff 0f 5c 02 00 01 00 10
    const ref = Buffer.from('00000008ff0f5c0200010010', 'hex');
    for (const bad of [fd, memfd]) {
      p.client[kWriter].sendRaw(Buffer.concat([control]), [bad]);
      p.client[kWriter].sendRaw(ref);
    }
    p.client.send({ after: true });
    const m = await nextOf(p.serverSide, 'the later message');
    assert.deepStrictEqual(m, { after: true }, 'later messages still arrive');
    assert.deepStrictEqual(errors, ['ERR_PROCWIRE_SEGMENT', 'ERR_PROCWIRE_SEGMENT']);
    fs.closeSync(fd);
  } finally {
    p.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a segment announcement without descriptors closes only that channel', TIMEOUT, async () => {
  const p = await namedPair();
  try {
    // once() would reject on the 'error' event that accompanies the close.
    const errors = [];
    p.serverSide.on('error', (err) => errors.push(err.code));
    const closed = new Promise((resolve) => p.serverSide.on('close', (...a) => resolve(a)));
    p.client[kWriter].sendRaw(Buffer.from([0, 0, 0, 2, 0xfe, 3]));
    const [reason, err] = await withTimeout(closed, WAIT, 'the close');
    assert.strictEqual(reason, 'framing-error');
    assert.strictEqual(err.code, 'ERR_PROCWIRE_SEGMENT');
    assert.deepStrictEqual(errors, ['ERR_PROCWIRE_SEGMENT']);
  } finally {
    p.close();
  }
});

// Open descriptors on /dev/null: the stray descriptors these tests send,
// counted apart from the sockets and rings that come and go meanwhile.
function devNullFds() {
  let n = 0;
  for (const e of fs.readdirSync('/proc/self/fd')) {
    try { if (fs.readlinkSync(`/proc/self/fd/${e}`) === '/dev/null') n++; } catch { /* closed meanwhile */ }
  }
  return n;
}

// A plain advanced frame (u32 big-endian length, then V8's payload).
function rawFrame(value) {
  const payload = require('v8').serialize(value);
  const header = Buffer.alloc(4);
  header.writeUInt32BE(payload.length);
  return Buffer.concat([header, payload]);
}

test('descriptors no frame claims are closed once the read is whole; the channel goes on', TIMEOUT, async () => {
  const p = await namedPair();
  try {
    const nullsBefore = devNullFds();
    const fd = fs.openSync('/dev/null', 'r');
    // A message that is no NODE_HANDLE and follows no announcement: the
    // descriptor riding on it is claimed by nothing.
    p.client[kWriter].sendRaw(rawFrame({ stray: 1 }), [fd]);
    fs.closeSync(fd);
    const m = await nextOf(p.serverSide, 'the stray message');
    assert.deepStrictEqual(m, { stray: 1 });
    p.client.send({ after: true });
    const after = await nextOf(p.serverSide, 'the later message');
    assert.deepStrictEqual(after, { after: true });
    assert.strictEqual(devNullFds(), nullsBefore, 'the unclaimed descriptor was closed');
    assert.strictEqual(p.serverSide.connected, true);
  } finally {
    p.close();
  }
});

for (const segmentPool of [false, true]) {
  test(`segments the receiver refuses (over its maxMessageSize) are still acknowledged${segmentPool ? ', recycled ones too' : ''}: the sender's backpressure recovers`, TIMEOUT, async () => {
    // Ends with different limits, a legitimate set-up: the receiver refuses
    // what is over its own, and must still say it took the memory, or the
    // sender counts it in flight for ever and send() stays false.
    const name = uniqueName();
    const server = procwire.listen(name, { maxMessageSize: 1 << 20, segmentPool });
    await server.ready;
    const accepted = once(server, 'channel');
    let client = null;
    let serverSide;
    try {
      client = await procwire.connect(name, { maxMessageSize: 64 << 20, segmentPool });
      [serverSide] = await withTimeout(accepted, WAIT, 'the accepted channel');
    } catch (err) {
      if (client !== null) client.destroy();
      server.close();
      throw err;
    }
    try {
      const refused = [];
      serverSide.on('messageerror', (err) => refused.push(err.code));
      const got = [];
      serverSide.on('message', (m) => got.push(m));
      // The capabilities must have crossed for segments to be used.
      await until(() => client.stats().outOfLine.enabled, WAIT, 'the peer\'s capabilities');
      for (let i = 0; i < 3; i++) assert.strictEqual(client.send({ data: Buffer.alloc(4 * MiB, i) }), false);
      client.send({ after: true });
      await until(() => got.length === 1 && client.writableLength === 0, WAIT, 'the later message, and nothing in flight');
      assert.deepStrictEqual(refused, ['ERR_PROCWIRE_SEGMENT', 'ERR_PROCWIRE_SEGMENT', 'ERR_PROCWIRE_SEGMENT']);
      assert.deepStrictEqual(got, [{ after: true }]);
      assert.strictEqual(client.stats().outOfLine.messagesOut, 3);
      assert.strictEqual(client.send({ small: 1 }), true, 'nothing is counted in flight any more');
    } finally {
      client.destroy();
      serverSide.destroy();
      server.close();
    }
  });
}

test('a second segment announcement before its message closes the channel', TIMEOUT, async () => {
  const p = await namedPair();
  try {
    const nullsBefore = devNullFds();
    const errors = [];
    p.serverSide.on('error', (err) => errors.push(err.code));
    const closed = new Promise((resolve) => p.serverSide.on('close', (...a) => resolve(a)));
    const fd = fs.openSync('/dev/null', 'r');
    const control = Buffer.from([0, 0, 0, 2, 0xfe, 1]);
    p.client[kWriter].sendRaw(control, [fd]);
    p.client[kWriter].sendRaw(control, [fd]);
    fs.closeSync(fd);
    const [reason, err] = await withTimeout(closed, WAIT, 'the close');
    assert.strictEqual(reason, 'framing-error');
    assert.strictEqual(err.code, 'ERR_PROCWIRE_SEGMENT');
    assert.match(err.message, /followed another/);
    assert.deepStrictEqual(errors, ['ERR_PROCWIRE_SEGMENT']);
    // The closed channel's native half goes after its close callback.
    await until(() => devNullFds() === nullsBefore, WAIT, 'both announced descriptors to be closed');
  } finally {
    p.close();
  }
});

test('10,000 transfers leak no descriptors and leave nothing in /dev/shm', { timeout: 120_000 }, async () => {
  const shmBefore = shmEntries();
  const child = procwire.fork(__filename, ['child'], { child: 'procwire', outOfLine: 'always', serialization: 'advanced' });
  const exited = exitOf(child);
  const ch = child.channel;
  // Each wait fails at once if the child died, and after WAIT if it hangs.
  const answer = (what) => unlessExited(nextOf(ch, what), exited, what);
  try {
    // One round trip first: by its end both ends have set up their rings
    // (each adds its descriptors once, when it reads the other's set-up).
    ch.send({ op: 'fds' });
    await answer('the first answer');
    ch.send({ op: 'fds' });
    const { fds: childFdsBefore } = await answer('the descriptor count before');
    const fdsBefore = fdSnapshot();
    let received = 0;
    const done = new Promise((resolve) => {
      const on = (m) => { if (m && m.n !== undefined && ++received === 10_000) { ch.off('message', on); resolve(); } };
      ch.on('message', on);
    });
    for (let i = 0; i < 10_000; i++) {
      const buf = procwire.alloc(4096);
      buf[0] = i & 0xff;
      if (!ch.send({ n: i, buf }, { transfer: [buf] })) {
        await unlessExited(withTimeout(once(ch, 'drain'), WAIT, 'drain'), exited, 'drain');
      }
    }
    await unlessExited(withTimeout(done, 60_000, '10,000 echoes'), exited, '10,000 echoes');
    // The child's received mappings go with garbage collection, not with
    // descriptors: it keeps none.
    ch.send({ op: 'fds' });
    const { fds: childFdsAfter } = await answer('the descriptor count after');
    assert.deepStrictEqual(fdsOpenedSince(fdsBefore), [], 'no descriptor leaked in the sender');
    assert.strictEqual(childFdsAfter, childFdsBefore, 'no descriptor leaked in the receiver');
    assert.strictEqual(ch.stats().outOfLine.messagesOut, 10_000);
    assert.deepStrictEqual(shmEntries(), shmBefore, 'memfd segments leave nothing in /dev/shm');
  } finally {
    await killChild(child, exited);
  }
});

test('a peer killed mid-transfer closes the channel; no descriptors stay behind', { timeout: 60_000 }, async (t) => {
  const fdsBefore = fdSnapshot();
  const child = procwire.fork(__filename, ['child'], { child: 'procwire', serialization: 'advanced' });
  const exited = exitOf(child);
  const ch = child.channel;
  t.after(() => {
    ch.destroy();
    return killChild(child, exited);
  });
  ch.send({ op: 'fds' });
  await unlessExited(nextOf(ch, 'the first answer'), exited, 'the first answer');
  const closed = once(ch, 'close');
  for (let i = 0; i < 16; i++) ch.send({ op: 'sum', data: Buffer.alloc(8 * MiB, i) });
  await new Promise((r) => setTimeout(r, 20));
  child.kill('SIGKILL');
  const [reason] = await withTimeout(closed, WAIT, 'the close after SIGKILL');
  assert.ok(['peer-closed', 'peer-reset'].includes(reason), reason);
  await withTimeout(exited, WAIT, 'the child to exit');
  await until(() => fdsOpenedSince(fdsBefore).length === 0, WAIT, 'every descriptor of the channel to be closed');
  assert.deepStrictEqual(fdsOpenedSince(fdsBefore), [], 'no descriptor leaked');
});

test('outOfLine: "never" keeps large views inline, and stats say so', TIMEOUT, async () => {
  const p = await namedPair({ outOfLine: 'never' });
  try {
    const data = crypto.randomBytes(4 * MiB);
    p.client.send({ data });
    const m = await nextOf(p.serverSide, 'the message');
    assert.ok(m.data.equals(data));
    assert.strictEqual(p.client.stats().outOfLine.enabled, false);
    assert.strictEqual(p.client.stats().outOfLine.messagesOut, 0);
    assert.throws(() => procwire.alloc(-1), { code: 'ERR_PROCWIRE_INVALID_ARG' });
  } finally {
    p.close();
  }
});

test('a peer that has not said it takes segments (like the JS fallback) gets everything inline', TIMEOUT, async () => {
  const fresh = await namedPairNoCaps();
  try {
    const data = crypto.randomBytes(2 * MiB);
    fresh.server.send({ data });
    const m = await nextOf(fresh.client, 'the message');
    assert.ok(m.data.equals(data));
    assert.strictEqual(fresh.server.stats().outOfLine.messagesOut, 0);
    assert.strictEqual(fresh.server.stats().outOfLine.enabled, false);
  } finally {
    fresh.close();
  }
});

// A named pair whose client never announces segment support (its
// announcement is removed before it is sent), standing in for a fallback peer.
async function namedPairNoCaps() {
  const { Writer } = require('../lib/channel/writer');
  const original = Writer.prototype.sendControl;
  Writer.prototype.sendControl = function (message) {
    if (message && message.cmd === 'NODE_PROCWIRE_CAPS') return;
    return original.call(this, message);
  };
  try {
    const p = await namedPair();
    return { server: p.serverSide, client: p.client, close: p.close };
  } finally {
    Writer.prototype.sendControl = original;
  }
}
