'use strict';
// Staged writes: on a native advanced channel, the messages of a tick after
// its first are encoded back to back into the channel's staging buffer and
// handed to the addon in batches (lib/channel.js, _write and _unstage).
// Whatever else is sent in the same tick (values the fast encoder declines,
// frames too big for the staging buffer, out-of-line views, transfers,
// internal messages) must keep its place, byte counts and send callbacks
// must stay true, and a staged frame over maxMessageSize must be refused
// exactly as any other, over the socket and over rings alike.

const test = require('node:test');
const assert = require('node:assert');
const procwire = require('..');
const { withTimeout, forkRingPeer } = require('./helpers/ring-peer');

const TIMEOUT = { timeout: 120_000 };
const skip = !procwire.native && 'staged writes are the native addon\'s';

const TRANSPORTS = [['rings', 'auto'], ['socket', 'never']];

async function forkPeer(t, options) {
  return (await forkRingPeer(t, options)).channel;
}

// Echoes with a numeric `seq`, in arrival order, until `count` came.
function collect(channel, count) {
  const seen = [];
  const done = new Promise((resolve, reject) => {
    channel.on('message', (m) => {
      if (m === null || typeof m !== 'object' || typeof m.seq !== 'number' || m.seq < 0) return;
      seen.push(m);
      if (seen.length === count) resolve(seen);
    });
    channel.once('close', (reason, err) => reject(err || new Error(`closed: ${reason}`)));
  });
  return withTimeout(done, 90_000, `${count} echoes`);
}

// What message `seq` of the mixed tick is; `check` says whether its echo
// is intact.
const KINDS = [
  { name: 'small', make: (seq) => ({ seq, v: seq }), check: (m, seq) => m.v === seq },
  // About 3 KiB each: a few fill the staging buffer to its last 4 KiB.
  { name: 'medium', make: (seq) => ({ seq, s: 'm'.repeat(3000 + seq) }), check: (m, seq) => m.s === 'm'.repeat(3000 + seq) },
  // The fast encoder declines a Map: ValueSerializer writes it.
  { name: 'map', make: (seq) => ({ seq, map: new Map([[seq, 'x']]) }), check: (m, seq) => m.map instanceof Map && m.map.get(seq) === 'x' },
  // Bigger than what is left of the staging buffer: it spills.
  { name: 'spilling', make: (seq) => ({ seq, s: 'z'.repeat(100_000) }), check: (m) => m.s === 'z'.repeat(100_000) },
  // Out of line (a segment): the native encoder's.
  { name: 'segment', make: (seq) => ({ seq, b: Buffer.alloc(2 << 20, seq & 0xff) }), check: (m, seq) => m.b.length === 2 << 20 && m.b.every((x) => x === (seq & 0xff)) },
  { name: 'small-after', make: (seq) => ({ seq, t: [seq, 'after'] }), check: (m, seq) => m.t[0] === seq && m.t[1] === 'after' },
];

for (const [name, rings] of TRANSPORTS) {
  test(`${name}: every kind of message sent in one tick keeps its place; callbacks in order, none inside send()`, { ...TIMEOUT, skip }, async (t) => {
    const channel = await forkPeer(t, { rings });
    const count = 360;
    const echoes = collect(channel, count);
    const outBefore = channel.stats().messagesOut;
    const callbacks = [];
    let transferred = 0;
    for (let seq = 0; seq < count; seq++) {
      if (seq % 37 === 36) {
        // A transfer: the buffer is detached here and travels as is.
        const buf = procwire.alloc(64 * 1024);
        buf.fill(seq & 0xff);
        channel.send({ seq, b: buf }, { transfer: [buf] }, (err) => callbacks.push([seq, err]));
        transferred++;
      } else {
        channel.send(KINDS[seq % KINDS.length].make(seq), (err) => callbacks.push([seq, err]));
      }
      assert.strictEqual(callbacks.length, 0, 'a send callback ran inside send()');
    }
    // Counted as sent already, staged or not.
    assert.strictEqual(channel.stats().messagesOut - outBefore, count);
    const seen = await echoes;
    seen.forEach((m, i) => {
      assert.strictEqual(m.seq, i, `echo ${i} out of order`);
      if (i % 37 === 36) {
        assert.ok(m.b.length === 64 * 1024 && m.b.every((x) => x === (i & 0xff)), `transfer ${i} corrupted`);
      } else {
        const kind = KINDS[i % KINDS.length];
        assert.ok(kind.check(m, i), `${kind.name} message ${i} corrupted`);
      }
    });
    assert.ok(transferred > 0);
    assert.deepStrictEqual(callbacks.map(([seq]) => seq), seen.map((m) => m.seq));
    assert.ok(callbacks.every(([, err]) => err === null || err === undefined));
    assert.strictEqual(channel.writableLength, 0);
    if (rings === 'auto') assert.ok(channel.stats().rings.messagesOut > 0, 'rings were used');
  });

  test(`${name}: a staged message over maxMessageSize is refused as the first of a tick is; nothing else is lost`, { ...TIMEOUT, skip }, async (t) => {
    const channel = await forkPeer(t, { rings, maxMessageSize: 4096 });
    const echoes = collect(channel, 6);
    const tooBig = { seq: 99, s: 'x'.repeat(5000) };
    // The first message of a tick goes to the addon at once; later ones are
    // staged. Both refusals must be the same.
    await new Promise((resolve) => setImmediate(resolve));
    let first;
    try { channel.send(tooBig); } catch (err) { first = err; }
    channel.send({ seq: 0 });
    channel.send({ seq: 1 });
    let staged;
    try { channel.send(tooBig); } catch (err) { staged = err; }
    channel.send({ seq: 2 });
    for (let seq = 3; seq < 6; seq++) channel.send({ seq, s: 'y'.repeat(4000) });
    assert.ok(first && staged, 'both oversized sends threw');
    assert.strictEqual(first.code, 'ERR_PROCWIRE_MESSAGE_TOO_LARGE');
    assert.deepStrictEqual([staged.code, staged.message], [first.code, first.message]);
    const seen = await echoes;
    assert.deepStrictEqual(seen.map((m) => m.seq), [0, 1, 2, 3, 4, 5]);
    assert.ok(seen.slice(3).every((m) => m.s === 'y'.repeat(4000)));
  });
  test(`${name}: a getter that sends, or asks for stats() or a transfer, while its message is encoded: Node's order, nothing corrupted`, { ...TIMEOUT, skip }, async (t) => {
    const channel = await forkPeer(t, { rings });
    // Node's serializer runs a getter before it writes the getter's
    // message, so what the getter sends goes first. Each case is the second
    // message of its tick or later (staged), except the first-of-tick one.
    const cases = [
      ['getter sends (staged)', (seq) => {
        channel.send({ seq: seq[0] });
        channel.send({ seq: seq[2], get x() { channel.send({ seq: seq[1] }); return 5; } });
        channel.send({ seq: seq[3] });
      }],
      ['getter sends (first of its tick)', (seq) => {
        channel.send({ seq: seq[1], get x() { channel.send({ seq: seq[0] }); return 5; } });
        channel.send({ seq: seq[2] });
        channel.send({ seq: seq[3] });
      }],
      ['getter asks for stats()', (seq) => {
        channel.send({ seq: seq[0] });
        channel.send({ seq: seq[1] });
        channel.send({ seq: seq[2], get s() { channel.stats(); return 'x'.repeat(40); } });
        channel.send({ seq: seq[3] });
      }],
      ['getter sends a transfer', (seq) => {
        channel.send({ seq: seq[0] });
        channel.send({ seq: seq[2], get x() {
          const b = procwire.alloc(1024);
          channel.send({ seq: seq[1], b }, { transfer: [b] });
          return 'x'.repeat(40);
        } });
        channel.send({ seq: seq[3] });
      }],
      ['getter of a message the fast encoder declines (a Map) sends', (seq) => {
        channel.send({ seq: seq[0] });
        channel.send({ seq: seq[2], m: new Map([[1, 2]]), get x() { channel.send({ seq: seq[1] }); return 5; } });
        channel.send({ seq: seq[3] });
      }],
      ['getter sends after a message that grew the encoder past 1 MiB', (seq) => {
        channel.send({ seq: seq[0], big: 'b'.repeat(2 << 20) });
        channel.send({ seq: seq[2], get x() { channel.send({ seq: seq[1], n: { deep: [1, 2, 3] } }); return 'x'.repeat(40); } });
        channel.send({ seq: seq[3] });
      }],
    ];
    const echoes = collect(channel, cases.length * 4);
    for (let i = 0; i < cases.length; i++) {
      await new Promise((resolve) => setImmediate(resolve));  // each case in a tick of its own
      cases[i][1]([0, 1, 2, 3].map((k) => i * 4 + k));
    }
    const seen = await echoes;
    for (let i = 0; i < cases.length; i++) {
      const got = seen.slice(i * 4, i * 4 + 4);
      assert.deepStrictEqual(got.map((m) => m.seq), [0, 1, 2, 3].map((k) => i * 4 + k), cases[i][0]);
    }
    assert.strictEqual(seen[4 * 5].big.length, 2 << 20);
    assert.deepStrictEqual(seen[4 * 5 + 1].n, { deep: [1, 2, 3] });
    assert.strictEqual(seen[4 * 3 + 1].b.length, 1024);
  });

}

test('a burst of staged control-free messages arrives whole: none lost, repeated or reordered', { ...TIMEOUT, skip }, async (t) => {
  const channel = await forkPeer(t, {});
  const result = new Promise((resolve) => channel.on('message', (m) => { if (m && m.op === 'count-result') resolve(m); }));
  channel.send({ op: 'count-start' });
  for (let i = 0; i < 5000; i++) channel.send({ op: 'count', i });
  channel.send({ op: 'count-end' });
  const { n, bad } = await withTimeout(result, 60_000, 'the count');
  assert.deepStrictEqual({ n, bad }, { n: 5000, bad: 0 });
});
