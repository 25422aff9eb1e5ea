'use strict';
// When send() writes. As libuv does, the first message since the last flush
// goes to the socket within send() when nothing is queued before it (so the
// peer can start on it while this side still works), later small messages
// of the same tick are gathered into one write at the end of the tick, and
// a large frame is written at once too, with only what the socket did not
// take copied and queued. None of that may reorder, lose or corrupt a
// message, or call a send callback inside send().

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { once } = require('events');
const procwire = require('..');

if (process.argv[2] === 'child-marker') {
  // A plain Node child: touches the file a message names, then echoes it.
  process.on('message', (m) => {
    if (typeof m.marker === 'string') fs.writeFileSync(m.marker, 'seen');
    process.send(m);
  });
  return;
}

const SERIALIZATIONS = ['json', 'advanced'];

function forkChild(serialization) {
  return procwire.fork(__filename, ['child-marker'], { serialization, child: 'node' });
}

// Busy-waits (the event loop cannot run meanwhile) until `file` exists.
function spinUntilExists(file, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (fs.existsSync(file)) return true;
  }
  return false;
}

for (const serialization of SERIALIZATIONS) {
  // The JS fallback (no addon) hands messages to Node's stream, which
  // writes them when the tick ends.
  test(`${serialization}: the first message of a tick reaches the peer before the tick ends`,
    { timeout: 30_000, skip: !procwire.native && 'the JS fallback backend writes at the end of the tick' }, async (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-write-now-'));
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const child = forkChild(serialization);
    t.after(() => child.kill());
    // One round trip first, so the child is up and reading.
    child.send({ marker: path.join(dir, 'warm-up') });
    await once(child, 'message');
    await new Promise((resolve) => setImmediate(resolve));
    const marker = path.join(dir, 'seen');
    let called = false;
    child.send({ marker }, () => { called = true; });
    assert.strictEqual(called, false, 'the send callback ran inside send()');
    assert.ok(spinUntilExists(marker, 10_000), 'the child never saw the message while this tick ran');
    const [echo] = await once(child, 'message');
    assert.deepStrictEqual(echo, { marker });
    assert.strictEqual(called, true);
  });

  test(`${serialization}: large and small messages written at once or queued arrive whole and in order`, { timeout: 60_000 }, async (t) => {
    const child = forkChild(serialization);
    t.after(() => child.kill());
    const sizes = [];
    for (let i = 0; i < 40; i++) sizes.push(i % 4 === 0 ? (1 << 20) + i : i % 4 === 1 ? 70_000 + i : i * 3);
    const messages = sizes.map((n, i) => ({ i, payload: String.fromCharCode(97 + (i % 26)).repeat(n) }));
    const received = [];
    const done = new Promise((resolve) => {
      child.on('message', (m) => {
        received.push(m);
        if (received.length === messages.length) resolve();
      });
    });
    const callbacks = [];
    // Half in one tick (the first written at once, the rest gathered or
    // queued behind a full socket), half one per tick.
    for (let i = 0; i < 20; i++) {
      child.send(messages[i], (err) => callbacks.push([i, err]));
      assert.strictEqual(callbacks.length, 0, 'a send callback ran inside send()');
    }
    for (let i = 20; i < messages.length; i++) {
      await new Promise((resolve) => setImmediate(resolve));
      child.send(messages[i], (err) => callbacks.push([i, err]));
    }
    await done;
    assert.strictEqual(received.length, messages.length);
    for (let i = 0; i < messages.length; i++) {
      assert.strictEqual(received[i].i, i, `message ${i} out of order`);
      assert.strictEqual(received[i].payload, messages[i].payload, `message ${i} corrupted`);
    }
    assert.deepStrictEqual(callbacks.map(([i]) => i), messages.map((_, i) => i));
    assert.ok(callbacks.every(([, err]) => err === null || err === undefined));
  });
}

test('destroy() right after send(): a message already written within send() gets a successful callback; one never written gets the close error', { timeout: 30_000 }, async (t) => {
  for (const rings of ['never', 'auto']) {
    const name = `write-now-${process.pid}-${rings}-${Date.now()}`;
    const server = procwire.listen(name, { rings });
    t.after(() => server.close());
    await server.ready;
    const accepted = once(server, 'channel');
    const client = await procwire.connect(name, { rings });
    client.on('error', () => {});
    const [peer] = await accepted;
    // One round trip first, so that rings (when on) are set up.
    const ready = once(peer, 'message');
    client.send('ready');
    await ready;
    await new Promise((resolve) => setImmediate(resolve));
    const received = [];
    peer.on('message', (m) => received.push(m.i));
    const peerClosed = once(peer, 'close');
    const callbacks = [];
    const settled = [];
    for (let i = 0; i < 4; i++) {
      settled.push(new Promise((resolve) => client.send({ i, s: 'x'.repeat(100) }, (err) => {
        callbacks[i] = err ? err.code : null;
        resolve();
      })));
    }
    client.destroy();
    await Promise.all(settled);
    await peerClosed;
    // The first message of the tick left within send(): it arrives, and its
    // callback says so. Every callback tells the truth about its message.
    assert.strictEqual(callbacks[0], null, `${rings}: the first message was written within send()`);
    assert.deepStrictEqual(received, callbacks.flatMap((c, i) => (c === null ? [i] : [])), rings);
    assert.ok(callbacks.every((c) => c === null || c === 'ERR_PROCWIRE_CHANNEL_CLOSED'), rings);
  }
});
