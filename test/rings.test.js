'use strict';
// Shared-memory rings between procwire ends on one host (docs/rings.md):
// order with socket frames, segments and handles, backpressure, liveness,
// hostile ring contents, wake-ups, idle CPU and leaks. Conformance over rings
// is test/conformance.test.js (fork-procwire and named use rings by default);
// this file checks that rings are really in use and what only rings can break.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const net = require('net');
const { once } = require('events');
const procwire = require('..');
const { namedPair, uniqueName } = require('./helpers/pair');
const { PEER, withTimeout, nextMessage, forkRingPeer } = require('./helpers/ring-peer');
const { until } = require('./helpers/wait');
const { running } = require('./helpers/pids');
const { VERSION: HELLO_VERSION } = require('../lib/auth').helloWire;
const { kWriter } = require('../lib/channel/symbols');

const TIMEOUT = { timeout: 120_000 };
const skip = !procwire.native && 'rings need the native addon';

async function peerStats(channel) {
  channel.send({ op: 'stats' });
  return (await nextMessage(channel, (m) => m && m.op === 'stats')).stats;
}

function cpuTicks(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return Number(fields[11]) + Number(fields[12]);  // utime + stime
}

test('a procwire child uses rings both ways; rings: "never" turns them off', { ...TIMEOUT, skip }, async (t) => {
  const { channel } = await forkRingPeer(t);
  for (let i = 0; i < 100; i++) channel.send(i);
  let n = 0;
  await withTimeout(new Promise((resolve) => channel.on('message', (m) => { if (typeof m === 'number' && ++n === 100) resolve(); })), 20_000, 'echoes');
  const mine = channel.stats().rings;
  assert.strictEqual(mine.enabled, true);
  assert.ok(mine.messagesOut >= 100, `messagesOut ${mine.messagesOut}`);
  assert.ok(mine.messagesIn >= 100, `messagesIn ${mine.messagesIn}`);
  const theirs = (await peerStats(channel)).rings;
  assert.strictEqual(theirs.enabled, true);
  assert.ok(theirs.messagesIn >= 100);

  const never = await forkRingPeer(t, { rings: 'never' });
  assert.deepStrictEqual(never.channel.stats().rings, { enabled: false, messagesOut: 0, messagesIn: 0 });
  assert.strictEqual((await peerStats(never.channel)).rings.enabled, false);
  assert.throws(() => procwire.fork(PEER, [], { child: 'procwire', rings: 'sometimes' }), { code: 'ERR_PROCWIRE_INVALID_ARG' });
});

test('named unix channels use rings after the hello', { ...TIMEOUT, skip }, async (t) => {
  const p = await namedPair();
  t.after(() => p.close());
  const got = [];
  p.serverSide.on('message', (m) => got.push(m));
  // Sent straight after connect: they go by the socket until the server's
  // set-up brings the link that wakes it, then by the ring, in one order.
  for (let i = 0; i < 1000; i++) p.client.send(i);
  await until(() => got.length === 1000, 20_000, 'messages', 5);
  assert.deepStrictEqual(got, Array.from({ length: 1000 }, (_, i) => i));
  // The server sets up its ring in answer to the client's: by the time an
  // answer reaches the client, both directions are on rings.
  p.serverSide.send('back');
  await withTimeout(nextMessage(p.client, (m) => m === 'back'), 20_000, 'the answer');
  assert.strictEqual(p.client.stats().rings.enabled, true);
  assert.strictEqual(p.serverSide.stats().rings.enabled, true);
  assert.ok(p.serverSide.stats().rings.messagesOut >= 1);
  const before = p.client.stats().rings.messagesOut;
  for (let i = 1000; i < 2000; i++) p.client.send(i);
  await until(() => got.length === 2000, 20_000, 'the second burst', 5);
  assert.deepStrictEqual(got.slice(1000), Array.from({ length: 1000 }, (_, i) => 1000 + i));
  assert.ok(p.client.stats().rings.messagesOut - before > 900);
});

function ringMaps() {
  return fs.readFileSync('/proc/self/maps', 'utf8').split('\n').filter((l) => l.includes('procwire-ring')).length;
}

// Descriptors of this process whose link starts with `prefix`.
function fdsLinkingTo(prefix) {
  return fs.readdirSync('/proc/self/fd').map(Number).filter((n) => {
    try { return fs.readlinkSync(`/proc/self/fd/${n}`).startsWith(prefix); } catch { return false; }
  });
}

for (const when of ['before its hello', 'after its hello, before its proof']) {
  test(`a ring set-up sent ${when} maps nothing and the peer is refused`, { ...TIMEOUT, skip }, async (t) => {
    // A working pair first, so this process holds a valid ring memfd and
    // wake-up link end to send, as a hostile local peer could.
    const p = await namedPair();
    t.after(() => p.close());
    p.client.send('x');
    await withTimeout(nextMessage(p.serverSide, (m) => m === 'x'), 20_000, 'x');
    p.serverSide.send('y');
    await withTimeout(nextMessage(p.client, (m) => m === 'y'), 20_000, 'y');
    const [ringFd] = fdsLinkingTo('/memfd:procwire-ring');
    const [wakeFd] = fdsLinkingTo('socket:');
    assert.ok(ringFd !== undefined && wakeFd !== undefined);

    // A server that requires the hello (its key file beside the socket).
    const name = uniqueName('ring-preauth');
    const server = procwire.listen(name);
    t.after(() => server.close());
    await server.ready;
    let admitted = 0;
    server.on('channel', () => { admitted++; });
    const rejected = new Promise((resolve) => server.once('reject', resolve));
    const mapsBefore = ringMaps();
    // The peer skips the proof: no secret, no rings of its own.
    const raw = await procwire.connect(name, { auth: false, rings: 'never' });
    t.after(() => raw.destroy());
    raw.on('error', () => {});
    if (when !== 'before its hello') {
      raw.send({ cmd: 'NODE_PROCWIRE_HELLO', v: HELLO_VERSION, nonce: 'ab'.repeat(32) });
    }
    raw[kWriter].sendRaw(Buffer.from([0, 0, 0, 2, 0xfd, 2]), [ringFd, wakeFd]);
    const err = await withTimeout(rejected, 10_000, 'the server to refuse the peer');
    assert.strictEqual(err.code, 'ERR_PROCWIRE_AUTH_REQUIRED', err.message);
    assert.strictEqual(ringMaps(), mapsBefore, 'no ring was mapped for the peer');
    assert.strictEqual(admitted, 0);
    await withTimeout(once(raw, 'close'), 10_000, 'the peer to be cut off');
  });
}

test('small, ring-sized, oversized, out-of-line and handle-carrying messages keep one order', { ...TIMEOUT, skip }, async (t) => {
  const { child, channel } = await forkRingPeer(t);
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  const plan = [];
  const seen = [];
  const all = new Promise((resolve) => channel.on('message', (m) => {
    if (m && typeof m.seq === 'number') {
      seen.push(m);
      if (seen.length === 300) resolve();
    }
  }));
  for (let seq = 0; seq < 300; seq++) {
    const kind = ['small', 'mid', 'big', 'segment', 'handle'][seq % 5];
    plan.push(kind);
    // Through the ChildProcess, whose handle protocol queues later
    // messages behind a handle until the child acknowledges it.
    if (kind === 'small') child.send({ seq, v: 'x' });
    else if (kind === 'mid') child.send({ seq, b: Buffer.alloc(40_000, seq & 0xff) });
    else if (kind === 'big') child.send({ seq, s: 'y'.repeat(700_000) });
    else if (kind === 'segment') child.send({ seq, b: Buffer.alloc(2 << 20, seq & 0xff) });
    else {
      const socket = net.connect(server.address().port, '127.0.0.1');
      await once(socket, 'connect');
      child.send({ seq }, socket);
    }
  }
  await withTimeout(all, 90_000, 'all echoes');
  seen.forEach((m, i) => {
    assert.strictEqual(m.seq, i, 'in order');
    if (plan[i] === 'handle') assert.strictEqual(m.kind, 'Socket');
    if (plan[i] === 'mid' || plan[i] === 'segment') assert.ok(m.b.every((x) => x === (i & 0xff)));
    if (plan[i] === 'big') assert.strictEqual(m.s.length, 700_000);
  });
  const s = channel.stats();
  assert.ok(s.rings.messagesOut > 0 && s.outOfLine.messagesOut > 0, 'rings and segments both used');
});

test('backpressure with a stalled reader: send() says false, then drain, nothing lost or reordered', { ...TIMEOUT, skip }, async (t) => {
  const { channel } = await forkRingPeer(t);
  channel.send({ op: 'count-start' });
  channel.send({ op: 'stall', ms: 1500 });
  let falses = 0;
  const n = 200_000;
  for (let i = 0; i < n; i++) {
    if (!channel.send({ op: 'count', i, pad: 'z'.repeat(32) })) {
      falses++;
      assert.ok(channel.writableLength >= channel.highWaterMark);
      await withTimeout(once(channel, 'drain'), 30_000, 'drain');
    }
  }
  channel.send({ op: 'count-end' });
  const result = await withTimeout(nextMessage(channel, (m) => m && m.op === 'count-result'), 60_000, 'count');
  assert.deepStrictEqual([result.n, result.bad], [n, 0]);
  assert.ok(falses > 0, 'send() returned false while the reader stalled');
  assert.ok(channel.stats().rings.messagesOut > 0);
});

// Must match seqText in test/fixtures/ring-peer.js: sizes 0 .. 4999, so
// ring records end at every alignment, and records straddle the end of the
// ring at ever-changing offsets.
function seqText(i) {
  return String.fromCharCode(97 + (i % 26)).repeat((i * 7919) % 5000);
}

async function sendSequence(channel, n, { stallMs = 0 } = {}) {
  channel.send({ op: 'count-start' });
  if (stallMs > 0) channel.send({ op: 'stall', ms: stallMs });
  for (let i = 0; i < n; i++) {
    if (!channel.send({ op: 'seq', i, s: seqText(i) }) && stallMs === 0) {
      await withTimeout(once(channel, 'drain'), 30_000, 'drain');
    }
    // Unless the reader is stalled on purpose, a round trip every 200
    // messages (about 500 KB) keeps the ring from filling, so every record
    // takes the ring.
    if (stallMs === 0 && i % 200 === 199) {
      channel.send({ op: 'ping', i });
      await withTimeout(nextMessage(channel, (m) => m && m.op === 'ping' && m.i === i), 30_000, 'a round trip');
    }
  }
  channel.send({ op: 'count-end' });
  return withTimeout(nextMessage(channel, (m) => m && m.op === 'count-result'), 60_000, 'the count');
}

test('wrap-around: 50 MB of records of every size lap the ring many times, all intact and in order', { ...TIMEOUT, skip }, async (t) => {
  const { channel } = await forkRingPeer(t);
  const before = channel.stats().rings.messagesOut;
  const n = 20_000;
  const result = await sendSequence(channel, n);
  assert.deepStrictEqual([result.n, result.bad], [n, 0]);
  // About 50 MB through a 1 MiB ring: dozens of laps, all on the ring.
  const onRing = channel.stats().rings.messagesOut - before;
  assert.ok(onRing >= n, `${onRing} of ${n} messages took the ring`);
});

test('a full ring: frames that do not fit take the socket, in order, nothing lost', { ...TIMEOUT, skip }, async (t) => {
  const { channel } = await forkRingPeer(t);
  const before = channel.stats();
  // The child reads nothing for a while; 12 MB are sent meanwhile, far
  // more than the ring holds.
  const n = 5000;
  const result = await sendSequence(channel, n, { stallMs: 1500 });
  assert.deepStrictEqual([result.n, result.bad], [n, 0]);
  const after = channel.stats();
  const total = after.messagesOut - before.messagesOut;
  const onRing = after.rings.messagesOut - before.rings.messagesOut;
  assert.ok(onRing > 0 && onRing < total, `${onRing} of ${total} messages took the ring`);
});

test('many sequential round trips: no wake-up is lost', { ...TIMEOUT, skip }, async (t) => {
  const { channel } = await forkRingPeer(t);
  const rounds = 20_000;
  const start = Date.now();
  await withTimeout(new Promise((resolve) => {
    let i = 0;
    channel.on('message', (m) => {
      if (m !== i) return;
      if (++i === rounds) resolve();
      else channel.send(i);
    });
    channel.send(0);
  }), 60_000, 'round trips');
  assert.ok(channel.stats().rings.messagesIn >= rounds);
  t.diagnostic(`${rounds} sequential round trips in ${Date.now() - start} ms`);
});

test('SIGKILL of the child mid-stream: the parent sees the close at once, messages in order', { ...TIMEOUT, skip }, async (t) => {
  const { child, channel } = await forkRingPeer(t);
  let next = 0;
  let bad = 0;
  channel.on('message', (m) => { if (m && typeof m.i === 'number') { if (m.i !== next) bad++; next++; } });
  // A half-written record delivered would fail to decode.
  let undecodable = 0;
  channel.on('messageerror', () => { undecodable++; });
  channel.send({ op: 'stream' });
  await until(() => next > 20_000, 30_000, 'streaming', 5);
  const closed = once(channel, 'close');
  child.kill('SIGKILL');
  await withTimeout(closed, 30_000, 'close after SIGKILL');
  assert.strictEqual(bad, 0);
  assert.strictEqual(undecodable, 0);
  assert.ok(channel.stats().rings.messagesIn > 0);
});

test('SIGKILL of the parent side mid-stream: its child sees the disconnect and exits', { ...TIMEOUT, skip }, async (t) => {
  const { child, channel } = await forkRingPeer(t);
  channel.send({ op: 'grandchild' });
  const { pid } = await withTimeout(nextMessage(channel, (m) => m && m.op === 'grandchild'), 20_000, 'grandchild');
  t.after(() => { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } });
  // Let the grandchild stream to its parent (our child) for a moment.
  await new Promise((resolve) => setTimeout(resolve, 500));
  child.kill('SIGKILL');
  const start = Date.now();
  // Orphaned, it is reaped by init, maybe late: exited is enough.
  await until(() => !running(pid), 10_000, 'the grandchild to exit');
  t.diagnostic(`grandchild gone ${Date.now() - start} ms after its parent's SIGKILL`);
});

for (const kind of ['misaligned-head', 'far-head', 'bad-record', 'torn-frames', 'bad-tail']) {
  test(`hostile ring contents (${kind}) close only that channel with ERR_PROCWIRE_RING_CORRUPT`, { ...TIMEOUT, skip }, async (t) => {
    const { child, channel } = await forkRingPeer(t);
    const other = await forkRingPeer(t);
    channel.on('error', () => {});
    child.on('error', () => {});
    // Not events.once: it would reject on the 'error' event.
    const closed = new Promise((resolve) => channel.once('close', (...args) => resolve(args)));
    channel.send({ op: 'scribble', kind });
    if (kind === 'bad-tail') {
      // The child broke the read index of *our* ring: we notice when the
      // ring fills and we read it, so fill it (the child reads nothing now).
      await withTimeout(nextMessage(channel, (m) => m && m.op === 'scribbled'), 10_000, 'the scribble');
      const chunk = { pad: Buffer.alloc(32 * 1024) };
      for (let i = 0; i < 64 && channel.connected; i++) channel.send(chunk);
    }
    const [reason, err] = await withTimeout(closed, 10_000, 'close');
    assert.strictEqual(reason, 'protocol-error');
    assert.strictEqual(err.code, 'ERR_PROCWIRE_RING_CORRUPT');
    assert.ok(err instanceof procwire.errors.RingCorruptError);
    // This process and its other channels go on.
    other.channel.send({ op: 'still' });
    await withTimeout(nextMessage(other.channel, (m) => m && m.op === 'still'), 10_000, 'the other channel');
    // The scribbling child was not crashed by its own ring either: it sees
    // the disconnect and exits normally.
    const [code, signal] = child.exitCode !== null ? [child.exitCode, null] : await withTimeout(once(child, 'exit'), 10_000, 'exit');
    assert.strictEqual(signal, null);
    assert.strictEqual(code, 0);
  });
}

test('an idle channel on rings uses no CPU on either side', { ...TIMEOUT, skip }, async (t) => {
  const { child, channel } = await forkRingPeer(t);
  for (let i = 0; i < 2000; i++) channel.send(i);
  await withTimeout(new Promise((resolve) => { let n = 0; channel.on('message', (m) => { if (typeof m === 'number' && ++n === 2000) resolve(); }); }), 20_000, 'echoes');
  assert.strictEqual(channel.stats().rings.enabled, true);
  await new Promise((resolve) => setTimeout(resolve, 200));
  const childBefore = cpuTicks(child.pid);
  const selfBefore = process.cpuUsage();
  await new Promise((resolve) => setTimeout(resolve, 3000));
  const childTicks = cpuTicks(child.pid) - childBefore;
  const self = process.cpuUsage(selfBefore);
  t.diagnostic(`idle 3 s: child ${childTicks} ticks, parent ${((self.user + self.system) / 1000).toFixed(1)} ms`);
  assert.ok(childTicks <= 3, `child used ${childTicks} clock ticks while idle`);
  assert.ok(self.user + self.system < 100_000, 'parent used CPU while idle');
});

test('no descriptor or mapping leaks over many channel open/close cycles', { ...TIMEOUT, skip }, async () => {
  const ringMaps = () => fs.readFileSync('/proc/self/maps', 'utf8').split('\n').filter((l) => l.includes('procwire-ring')).length;
  const fds = () => fs.readdirSync('/proc/self/fd').length;
  // Each wait is bounded and the pair closed whatever happens, so that a
  // failed cycle fails the test instead of leaving its sockets to hold the
  // process.
  const cycle = async () => {
    const p = await namedPair();
    try {
      p.client.send('hello');
      await withTimeout(nextMessage(p.serverSide, (m) => m === 'hello'), 10_000, 'hello');
      p.serverSide.send('back');
      await withTimeout(nextMessage(p.client, (m) => m === 'back'), 10_000, 'back');
      assert.strictEqual(p.client.stats().rings.enabled, true);
      const closed = [once(p.client, 'close'), once(p.serverSide, 'close')];
      p.close();
      await withTimeout(Promise.all(closed), 10_000, 'both ends to close');
    } finally {
      p.close();
    }
  };
  await cycle();
  await new Promise((resolve) => setImmediate(resolve));
  const fdsBefore = fds();
  const mapsBefore = ringMaps();
  for (let i = 0; i < 200; i++) await cycle();
  // Closing handles finish on later loop turns: wait for the counts, with a deadline.
  await until(() => ringMaps() <= mapsBefore && fds() <= fdsBefore + 2, 30_000, 'the rings and descriptors to go').catch(() => {});
  assert.ok(ringMaps() <= mapsBefore, `ring mappings: ${mapsBefore} before, ${ringMaps()} after`);
  assert.ok(fds() <= fdsBefore + 2, `descriptors: ${fdsBefore} before, ${fds()} after`);
});
