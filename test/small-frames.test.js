'use strict';
// Small advanced frames are decoded in JavaScript, a batch per read (the
// addon copies them into the channel's buffers; lib/channel.js
// decodeSmallFrames), while frames holding views, resizable ArrayBuffers or
// more bytes than the small-frame bound stay with the addon's decoder, as do
// the frames of a batch past the buffers' bounds. These tests mix every kind
// in single reads and check that values, order, decode errors and stats come
// out as if one decoder had read them all.

const test = require('node:test');
const assert = require('node:assert');
const net = require('net');
const v8 = require('v8');
const { once } = require('events');
const procwire = require('..');
const { namedPair, uniqueName } = require('./helpers/pair');
const { withTimeout, until } = require('./helpers/wait');

// One value of each kind, for message number i: which decoder takes it
// depends only on its bytes.
function valueOf(i) {
  switch (i % 8) {
    case 0: return { i, plain: 'x'.repeat(i % 50) };
    case 1: return { i, view: Buffer.from([i & 0xff, 1, 2, 3]) }; // host object tag '\'
    case 2: return { i, tilde: 'a~b' }; // '~' byte
    case 3: return { i, map: new Map([[i, 'v']]) }; // the fast path declines a Map
    case 4: return { i, big: 'y'.repeat(3000) }; // over the small-frame bound
    case 5: return { i, twoByte: 'ü€😀', n: -i, d: i + 0.5, big: BigInt(i) * 10n ** 20n };
    case 6: return [i, null, undefined, true, false, { nested: [i] }];
    default: return { i, date: new Date(1_700_000_000_000 + i), set: new Set([i]) };
  }
}

// A payload framed as advanced: u32 big-endian length, payload.
function frame(payload) {
  const header = Buffer.alloc(4);
  header.writeUInt32BE(payload.length);
  return Buffer.concat([header, payload]);
}

// A payload that is not a valid V8 value, with neither '\' nor '~' in it,
// so that JavaScript decodes it: an object whose first key is cut off.
const MALFORMED = Buffer.from('ff0f6f2205', 'hex');

test('one read mixing every kind of frame: values, order and decode errors as one decoder', { timeout: 30_000 }, async () => {
  const name = uniqueName('small');
  // A raw peer writes the bytes: the hello is off (it has its own tests).
  const server = procwire.listen(name, { auth: false, rings: 'never' });
  await server.ready;
  const accepted = once(server, 'channel');
  const raw = net.connect(server.address().path);
  await once(raw, 'connect');
  const [ch] = await accepted;
  try {
    const COUNT = 3000; // more frames than the channel's small-frame buffers hold
    const expected = [];
    const parts = [];
    const malformedBefore = new Set();
    for (let i = 0; i < COUNT; i++) {
      if (i % 97 === 0) {
        parts.push(frame(MALFORMED));
        malformedBefore.add(expected.length);
      }
      const value = valueOf(i);
      expected.push(v8.deserialize(v8.serialize(value)));
      // procwire's encoder writes Node's IPC bytes (test/codec.test.js).
      parts.push(procwire.codec.advanced.encode(value));
    }
    const events = [];
    ch.on('message', (m) => events.push(['message', m]));
    ch.on('messageerror', (err) => events.push(['error', err]));
    raw.write(Buffer.concat(parts));
    // Bounded, so that the finally below closes the sockets also when
    // messages go missing.
    await until(() => events.filter((e) => e[0] === 'message').length === COUNT, 20_000, `${COUNT} messages`, 5);
    let m = 0;
    let errors = 0;
    for (const [kind, value] of events) {
      if (kind === 'error') {
        assert.strictEqual(value.code, 'ERR_PROCWIRE_DECODE');
        assert.ok(malformedBefore.has(m), `a decode error reported before message ${m}, where none was sent`);
        errors++;
        continue;
      }
      assert.deepStrictEqual(value, expected[m], `message ${m}`);
      m++;
    }
    assert.strictEqual(errors, malformedBefore.size);
    assert.strictEqual(ch.stats().decodeErrors, malformedBefore.size);
    assert.strictEqual(ch.stats().messagesIn, COUNT + malformedBefore.size);
    // Views that came through the addon still borrow nothing they should not:
    // each is its own message's bytes.
    for (let i = 1; i < COUNT; i += 8) assert.strictEqual(events.find((e) => e[1].i === i)[1].view[0], i & 0xff);
  } finally {
    raw.destroy();
    ch.destroy();
    server.close();
  }
});

test('procwire peers on rings and on the socket: every kind, in order, values intact', { timeout: 30_000 }, async () => {
  for (const rings of ['auto', 'never']) {
    const p = await namedPair({ rings });
    try {
      if (rings === 'auto') {
        // The client's ring carries messages once the server's set-up has
        // brought the link that wakes the server: one round trip.
        p.serverSide.once('message', () => p.serverSide.send('pong'));
        const pong = once(p.client, 'message');
        p.client.send('ping');
        await withTimeout(pong, 10_000, 'the first round trip');
      }
      const COUNT = 5000;
      const got = [];
      const done = new Promise((resolve) => {
        p.serverSide.on('message', (m) => { got.push(m); if (got.length === COUNT) resolve(); });
      });
      for (let i = 0; i < COUNT; i++) p.client.send(valueOf(i));
      await withTimeout(done, 10_000, `${COUNT} messages (rings ${rings})`);
      for (let i = 0; i < COUNT; i++) assert.deepStrictEqual(got[i], v8.deserialize(v8.serialize(valueOf(i))), `${rings}: message ${i}`);
      assert.strictEqual(p.serverSide.stats().decodeErrors, 0);
      if (rings === 'auto') assert.ok(p.client.stats().rings.messagesOut > 0, 'the ring carried messages');
    } finally {
      p.close();
    }
  }
});

test('a decoded message keeps its values after later batches reuse the small-frame buffers', { timeout: 30_000 }, async () => {
  const p = await namedPair();
  try {
    const kept = [];
    for (let round = 0; round < 20; round++) {
      const batch = [];
      const done = new Promise((resolve) => {
        const on = (m) => { batch.push(m); if (batch.length === 100) { p.serverSide.off('message', on); resolve(); } };
        p.serverSide.on('message', on);
      });
      for (let i = 0; i < 100; i++) p.client.send({ round, i, s: `r${round}i${i}`, a: [round, i], o: { k: `${i}` } });
      await withTimeout(done, 10_000, `round ${round}`);
      kept.push(...batch);
    }
    for (let n = 0; n < kept.length; n++) {
      const round = Math.floor(n / 100);
      const i = n % 100;
      assert.deepStrictEqual(kept[n], { round, i, s: `r${round}i${i}`, a: [round, i], o: { k: `${i}` } });
    }
  } finally {
    p.close();
  }
});
