'use strict';
// Recycled shared-memory segments (segmentPool): a sender's pool of
// pre-faulted segments that the receiver hands back once the Buffers over
// them are collected; bounds, idle trimming, hostile peers, leaks, and the
// transfer seals each mode uses.

const test = require('node:test');
const assert = require('node:assert');
const crypto = require('crypto');
const fs = require('fs');
const v8 = require('v8');
const vm = require('vm');
const procwire = require('..');
const { namedPair } = require('./helpers/pair');
const { fdSnapshot, fdsOpenedSince } = require('./helpers/fds');
const { withTimeout, exitOf, unlessExited, killChild } = require('./helpers/wait');
const { messageWithin } = require('./helpers/messages');
const { kWriter, kHandle, kControl } = require('../lib/channel/symbols');

// Returns depend on the receiver's garbage collection; the tests force it.
v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');

if (process.argv[2] === 'child') {
  // A procwire child: reports the length and edge bytes of what it got.
  const ch = procwire.parent;
  let kept = null;
  let worker = null;
  const garbage = [];
  ch.on('message', (m) => {
    if (m && m.op === 'check') {
      ch.send({ op: 'check', length: m.data.length, first: m.data[0], last: m.data[m.data.length - 1] });
      return;
    }
    if (m && m.op === 'keep') {
      // Holds on to received Buffers in the ways an application may (all
      // messages have one size, so a segment handed back too early would
      // be reused for the next one): keeps one across the next message,
      // then hands both back with release(); moves one to a worker thread,
      // which overwrites it; lets one go to the collector.
      const sum = (buf) => { let x = 0; for (let j = 0; j < buf.length; j += 4096) x = (x + buf[j]) >>> 0; return x; };
      const reply = { op: 'keep', i: m.i, sum: sum(m.data), kept: kept === null ? -1 : sum(kept.data) };
      for (let j = 0; j < 200; j++) garbage.push(Buffer.alloc(1024, j));
      garbage.length = 0;
      if (m.i % 4 === 0) {
        kept = m;
      } else if (m.i % 4 === 1) {
        procwire.release(kept.data);
        procwire.release(m.data);
        kept = null;
      } else if (m.i % 4 === 2) {
        if (worker === null) {
          const { Worker } = require('worker_threads');
          worker = new Worker("require('worker_threads').parentPort.on('message', (b) => { b.fill(0); });", { eval: true });
          worker.unref();
        }
        worker.postMessage(m.data, [m.data.buffer]);
      }
      ch.send(reply);
      return;
    }
    ch.send(m);
  });
  return;
}

const KiB = 1024;
const MiB = 1024 * KiB;
// [our segments, our bytes, our in flight, peer's segments we map, their bytes]
const S = { SEGMENTS: 0, BYTES: 1, IN_FLIGHT: 2, MAPPED: 3, MAPPED_BYTES: 4 };

function poolStats(ch) {
  return ch[kHandle].segmentPoolStats();
}


// Bytes of memfd segments this process maps (procwire's own segments only).
function mappedSegmentBytes() {
  let bytes = 0;
  for (const line of fs.readFileSync('/proc/self/maps', 'utf8').split('\n')) {
    if (!line.includes('/memfd:procwire')) continue;
    const [range] = line.split(' ');
    const [from, to] = range.split('-').map((x) => BigInt(`0x${x}`));
    bytes += Number(to - from);
  }
  return bytes;
}

// Every wait is bounded, within each test's own limit, so that a message
// that never comes fails the test and its finally still closes the pair.
const WAIT = 10_000;

// The next message on `channel`, or a failure naming `what`.
function nextOf(channel, what) {
  return messageWithin(channel, WAIT, what);
}

// Polls until cond() holds (collecting garbage between tries), or fails; not
// the shared helpers/wait.js until(), as it drives the collector between tries.
// A young-generation collection frees a just-received Buffer and is cheap;
// a full one follows when that was not enough.
async function until(cond, what, ms = 5000) {
  const deadline = Date.now() + ms;
  for (let round = 0; !cond(); round++) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    if (round % 4 === 0) gc({ type: 'minor' }); else gc();
    await new Promise((r) => (round === 0 ? setImmediate(r) : setTimeout(r, 2)));
  }
}

// Waits for message {i, payload} and checks it, keeping no reference.
async function receiveOne(ch, i) {
  const m = await nextOf(ch, `message ${i}`);
  assert.strictEqual(m.i, i);
  assert.strictEqual(m.payload[0], i & 0xff);
}

// Sends {i, data} and checks what arrives (in a function of its own, so
// the caller's frame keeps no reference to the received Buffer).
async function sendAndCheck(p, i, data) {
  p.client.send({ i, data });
  const m = await nextOf(p.serverSide, `message ${i}`);
  assert.strictEqual(m.i, i);
  assert.ok(m.data.equals(data), `message ${i} has its own bytes`);
}

async function pooledPair(options = {}) {
  const p = await namedPair({ segmentPool: true, outOfLineThreshold: 64 * KiB, ...options });
  try {
    // One round trip each way: both ends have read the other's capabilities.
    p.client.send({ hello: 1 });
    await nextOf(p.serverSide, 'the first hello');
    p.serverSide.send({ hello: 2 });
    await nextOf(p.client, 'the second hello');
  } catch (err) {
    p.close();
    throw err;
  }
  return p;
}

test('named channels keep sealed single-use segments unless both ends turn the pool on', { timeout: 30_000 }, async () => {
  const p = await namedPair();
  try {
    p.client.send({ hello: 1 });
    await nextOf(p.serverSide, 'the hello');
    assert.strictEqual(p.client.segmentPool, false);
    const data = crypto.randomBytes(2 * MiB);
    p.client.send({ data });
    const m = await nextOf(p.serverSide, 'the message');
    assert.ok(m.data.equals(data));
    assert.deepStrictEqual(poolStats(p.client), [0, 0, 0, 0, 0], 'no pool on either side');
    assert.strictEqual(p.client.stats().outOfLine.messagesOut, 1);
  } finally {
    p.close();
  }
});

test('a stream of large messages reuses a few recycled segments, each message with its own bytes', { timeout: 30_000 }, async () => {
  const p = await pooledPair();
  try {
    for (let i = 0; i < 40; i++) {
      if (i % 4 === 0) {
        // Collected on the receiving side (no message of earlier rounds is
        // referenced here any more): the segments come back.
        await until(() => poolStats(p.client)[S.IN_FLIGHT] === 0, 'segments back');
      }
      await sendAndCheck(p, i, crypto.randomBytes(1 * MiB + 1 + i));
    }
    const s = poolStats(p.client);
    assert.ok(s[S.SEGMENTS] >= 1 && s[S.SEGMENTS] <= 4, `a few segments served 40 messages (${s})`);
    assert.strictEqual(s[S.BYTES], s[S.SEGMENTS] * 2 * MiB, 'every one in the 2 MiB class');
    assert.strictEqual(poolStats(p.serverSide)[S.MAPPED], s[S.SEGMENTS], 'the receiver maps each once');
    assert.strictEqual(p.client.stats().outOfLine.messagesOut, 40);
  } finally {
    p.close();
  }
});

test('pool bounds: a receiver that keeps every Buffer gets sealed copies past the bound', { timeout: 30_000 }, async () => {
  const p = await pooledPair({ segmentPoolMaxCount: 2, segmentPoolMaxBytes: 8 * MiB });
  try {
    const kept = [];
    for (let i = 0; i < 6; i++) {
      const data = crypto.randomBytes(3 * MiB);
      p.client.send({ data });
      const m = await nextOf(p.serverSide, 'the message');
      assert.ok(m.data.equals(data));
      kept.push(m);
    }
    let s = poolStats(p.client);
    assert.strictEqual(s[S.SEGMENTS], 2, 'never more than segmentPoolMaxCount');
    assert.ok(s[S.BYTES] <= 8 * MiB);
    assert.strictEqual(s[S.IN_FLIGHT], 2, 'both held by the receiver');
    assert.strictEqual(p.client.stats().outOfLine.messagesOut, 6, 'the rest went as sealed copies');
    // Bytes: a 4 MiB class would break the byte bound with two in flight.
    const big = crypto.randomBytes(5 * MiB);
    p.client.send({ big });
    const m = await nextOf(p.serverSide, 'the message');
    assert.ok(m.big.equals(big));
    s = poolStats(p.client);
    assert.ok(s[S.BYTES] <= 8 * MiB, `${s}`);
    kept.length = 0;
  } finally {
    p.close();
  }
});

test('release() hands a segment back at once, without waiting for garbage collection', { timeout: 30_000 }, async () => {
  const p = await pooledPair();
  try {
    const kept = [];
    for (let i = 0; i < 20; i++) {
      const data = crypto.randomBytes(2 * MiB);
      p.client.send({ data });
      const m = await nextOf(p.serverSide, 'the message');
      assert.ok(m.data.equals(data));
      kept.push(m);  // still referenced: only release() can give it back
      assert.strictEqual(procwire.release(m.data), true);
      assert.strictEqual(m.data.length, 0, 'the released Buffer is empty');
      assert.strictEqual(procwire.release(m.data), false, 'twice is a no-op');
      await until(() => poolStats(p.client)[S.IN_FLIGHT] === 0, 'the segment back');
    }
    assert.strictEqual(poolStats(p.client)[S.SEGMENTS], 1, 'one segment served all 20');
    assert.strictEqual(procwire.release(Buffer.alloc(10)), false, 'an ordinary Buffer is left alone');
    assert.strictEqual(procwire.release(new ArrayBuffer(8)), false);
    assert.throws(() => procwire.release('x'), { code: 'ERR_PROCWIRE_INVALID_ARG' });
    kept.length = 0;
  } finally {
    p.close();
  }
});

test('idle segments are trimmed and the receiver unmaps them', { timeout: 30_000 }, async () => {
  const p = await pooledPair({ segmentPoolIdleTimeout: 50 });
  try {
    const before = mappedSegmentBytes();
    for (let i = 0; i < 3; i++) {
      p.client.send({ data: Buffer.alloc(1 * MiB, i) });
      await nextOf(p.serverSide, 'the message');
    }
    await until(() => poolStats(p.client)[S.IN_FLIGHT] === 0, 'segments back');
    assert.ok(poolStats(p.client)[S.SEGMENTS] >= 1);
    await until(() => poolStats(p.client)[S.SEGMENTS] === 0, 'the idle pool trimmed');
    await until(() => poolStats(p.serverSide)[S.MAPPED] === 0, 'the receiver unmapped them');
    assert.ok(mappedSegmentBytes() <= before, 'no segment mapping left in this process');
  } finally {
    p.close();
  }
});

test('a peer returning ids it was never lent closes the channel with ERR_PROCWIRE_PROTOCOL', { timeout: 30_000 }, async () => {
  for (const ids of [[12345], [0], ['1'], [], [1.5], 'x', [2 ** 32]]) {
    const p = await pooledPair();
    try {
      const closed = new Promise((resolve) => p.client.on('close', (...a) => resolve(a)));
      p.client.on('error', () => {});
      p.serverSide[kWriter].sendControl({ cmd: 'NODE_PROCWIRE_SEGRET', ids });
      const [reason, err] = await withTimeout(closed, WAIT, 'the close');
      assert.strictEqual(reason, 'protocol-error', JSON.stringify(ids));
      assert.strictEqual(err.code, 'ERR_PROCWIRE_PROTOCOL');
    } finally {
      p.close();
    }
  }
  // Returning a segment twice (the second time it is idle) is bogus too.
  const p = await pooledPair();
  try {
    p.client.send({ data: Buffer.alloc(1 * MiB) });
    await nextOf(p.serverSide, 'the message');
    await until(() => poolStats(p.client)[S.IN_FLIGHT] === 0, 'segment back');
    const closed = new Promise((resolve) => p.client.on('close', (...a) => resolve(a)));
    p.client.on('error', () => {});
    p.serverSide[kWriter].sendControl({ cmd: 'NODE_PROCWIRE_SEGRET', ids: [1] });
    const [reason] = await withTimeout(closed, WAIT, 'the close');
    assert.strictEqual(reason, 'protocol-error');
  } finally {
    p.close();
  }
});

test('hostile announcements of recycled segments are skipped with ERR_PROCWIRE_SEGMENT', { timeout: 30_000 }, async () => {
  const p = await pooledPair();
  try {
    const errors = [];
    p.serverSide.on('messageerror', (err) => errors.push(err.code));
    // The receiver acknowledges every segment it was told of; this sender
    // forges announcements its own counters do not know, so it ignores the
    // acknowledgements (as a hostile peer would).
    const clientControl = p.client[kControl];
    const onMessage = clientControl.onMessage;
    clientControl.onMessage = function (message, fd) {
      if (message.cmd !== 'NODE_PROCWIRE_SEGACK') onMessage.call(this, message, fd);
    };
    // [0xFC][1] + [kind 2][id][length]: an id never announced.
    const entry = (kind, id, length) => {
      const b = Buffer.alloc(9);
      b[0] = kind;
      b.writeUInt32BE(id, 1);
      b.writeUInt32BE(length, 5);
      return b;
    };
    const control = (...entries) => {
      const payload = Buffer.concat([Buffer.from([0xfc, entries.length]), ...entries]);
      const head = Buffer.alloc(4);
      head.writeUInt32BE(payload.length);
      return Buffer.concat([head, payload]);
    };
    // A frame referring to segment 0 as a Uint8Array of 16 bytes.
    const ref = Buffer.from('00000008ff0f5c0200010010', 'hex');
    p.client[kWriter].sendRaw(control(entry(2, 777, 16)));
    p.client[kWriter].sendRaw(ref);
    // A real segment first, so id 1 exists; then a length past its end.
    p.client.send({ data: Buffer.alloc(1 * MiB, 3) });
    const first = await nextOf(p.serverSide, 'the message');
    assert.strictEqual(first.data[0], 3);
    p.client[kWriter].sendRaw(control(entry(2, 1, 0xffffffff)));
    p.client[kWriter].sendRaw(ref);
    p.client.send({ after: true });
    const m = await nextOf(p.serverSide, 'the message');
    assert.deepStrictEqual(m, { after: true }, 'the stream goes on');
    assert.deepStrictEqual(errors, ['ERR_PROCWIRE_SEGMENT', 'ERR_PROCWIRE_SEGMENT']);
    // Forgetting ids that do not exist is ignored.
    p.client[kWriter].sendControl({ cmd: 'NODE_PROCWIRE_SEGDROP', ids: [4242] });
    p.client.send({ still: true });
    const m2 = await nextOf(p.serverSide, 'the message');
    assert.deepStrictEqual(m2, { still: true });
    // A malformed announcement breaks the framing contract: the channel closes.
    const closed = new Promise((resolve) => p.serverSide.on('close', (...a) => resolve(a)));
    p.serverSide.on('error', () => {});
    p.client[kWriter].sendRaw(control(entry(9, 1, 1)));
    const [reason, err] = await withTimeout(closed, WAIT, 'the close');
    assert.strictEqual(reason, 'framing-error');
    assert.strictEqual(err.code, 'ERR_PROCWIRE_SEGMENT');
  } finally {
    p.close();
  }
});

test('recycled segments are refused by a receiver that did not turn the pool on', { timeout: 30_000 }, async () => {
  const p = await namedPair();
  try {
    p.client.send({ hello: 1 });
    await nextOf(p.serverSide, 'the hello');
    const closed = new Promise((resolve) => p.serverSide.on('close', (...a) => resolve(a)));
    p.serverSide.on('error', () => {});
    p.client[kWriter].sendRaw(Buffer.from([0, 0, 0, 11, 0xfc, 1, 2, 0, 0, 0, 1, 0, 0, 0, 16]));
    const [reason, err] = await withTimeout(closed, WAIT, 'the close');
    assert.strictEqual(reason, 'framing-error');
    assert.strictEqual(err.code, 'ERR_PROCWIRE_SEGMENT');
  } finally {
    p.close();
  }
});

test('segment cycles leak no descriptor and no mapping', { timeout: 60_000 }, async (t) => {
  // 100k cycles of 64 KiB segments take about a minute here (each cycle is a
  // message, a collection on the receiving side and a return message), so
  // this runs as many as fit in about 3 s; the C++ test
  // (test/cpp/segment_pool_test.cc) runs the pool itself through 100k.
  const p = await pooledPair({ outOfLine: 'always', segmentPoolMaxCount: 8 });
  try {
    const payload = Buffer.alloc(64 * KiB, 1);
    const warm = async (n) => {
      for (let i = 0; i < n; i++) {
        payload[0] = i & 0xff;
        if (i % 8 === 0) await until(() => poolStats(p.client)[S.IN_FLIGHT] === 0, 'segments back');
        p.client.send({ i, payload });
        await receiveOne(p.serverSide, i);
      }
      await until(() => poolStats(p.client)[S.IN_FLIGHT] === 0, 'segments back');
    };
    await warm(64);
    const fdsBefore = fdSnapshot();
    const mappedBefore = mappedSegmentBytes();
    const segmentsBefore = poolStats(p.client)[S.SEGMENTS];
    const deadline = Date.now() + 3000;
    let cycles = 0;
    while (Date.now() < deadline) {
      await warm(64);
      cycles += 64;
    }
    assert.ok(cycles >= 64);
    t.diagnostic(`${cycles} segment cycles in 3 s`);
    assert.strictEqual(poolStats(p.client)[S.SEGMENTS], segmentsBefore, `the same segments served ${cycles} cycles`);
    assert.deepStrictEqual(fdsOpenedSince(fdsBefore), [], 'no descriptor leaked');
    assert.strictEqual(mappedSegmentBytes(), mappedBefore, 'no mapping leaked');
    assert.strictEqual(p.client.stats().outOfLine.messagesOut, cycles + 64);
  } finally {
    p.close();
  }
});

test('fork channels: recycled segments by default, transfers without a copy, and the child reads the right bytes', { timeout: 30_000 }, async () => {
  const child = procwire.fork(__filename, ['child'], { child: 'procwire', serialization: 'advanced' });
  // Taken now, so that it holds also when the child died before the finally;
  // each answer fails at once if the child died, and after WAIT if it hangs.
  const exited = exitOf(child);
  const answer = (what) => unlessExited(nextOf(child.channel, what), exited, what);
  try {
    const ch = child.channel;
    ch.send({ op: 'ping' });
    await answer('the ping');
    assert.strictEqual(ch.segmentPool, true);
    for (let i = 0; i < 5; i++) {
      const data = Buffer.alloc(4 * MiB, i + 1);
      data[data.length - 1] = 0xee;
      ch.send({ op: 'check', data });
      const r = await answer(`check ${i}`);
      assert.deepStrictEqual(r, { op: 'check', length: 4 * MiB, first: i + 1, last: 0xee });
    }
    assert.ok(poolStats(ch)[S.SEGMENTS] >= 1, 'the pool was used');
    const buf = procwire.alloc(8 * MiB);
    buf.fill(0x5a);
    ch.send({ op: 'check', data: buf }, { transfer: [buf] });
    assert.strictEqual(buf.length, 0, 'detached');
    const r = await answer('the transferred check');
    assert.deepStrictEqual(r, { op: 'check', length: 8 * MiB, first: 0x5a, last: 0x5a });
  } finally {
    await killChild(child, exited);
  }
});

test('a child that keeps, releases and moves received segments to a worker reads every message right', { timeout: 30_000 }, async () => {
  const child = procwire.fork(__filename, ['child'], { child: 'procwire', serialization: 'advanced', outOfLine: 'always' });
  const exited = exitOf(child);
  try {
    const ch = child.channel;
    const sum = (buf) => { let x = 0; for (let j = 0; j < buf.length; j += 4096) x = (x + buf[j]) >>> 0; return x; };
    // The child's answer, or a failure as soon as it dies (or after WAIT).
    const answer = () => unlessExited(nextOf(ch, 'the child\'s answer'), exited, 'the child\'s answer');
    let previous = -1;
    for (let i = 0; i < 24; i++) {
      const data = Buffer.alloc(8 * MiB, i + 1);
      data[4096 * (i + 1)] = 0xee;
      ch.send({ op: 'keep', i, data });
      const r = await answer();
      assert.strictEqual(r.i, i);
      assert.strictEqual(r.sum, sum(data), `message ${i} arrived intact`);
      // The Buffer kept from the message before still holds its bytes: its
      // segment was not handed back (and reused for this one) while held.
      if (i % 4 === 1) assert.strictEqual(r.kept, previous, `the Buffer kept from message ${i - 1} is intact`);
      previous = r.sum;
    }
    assert.ok(poolStats(ch)[S.SEGMENTS] >= 1, 'the pool was used');
  } finally {
    await killChild(child, exited);
  }
});
