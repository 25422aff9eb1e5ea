'use strict';
// A peer that writes and then closes: what it wrote before closing is
// delivered, whichever write of ours finds it gone first. Node's channel
// reads everything before it sees the end; so must procwire's, including
// when the addon itself (not a send() from JavaScript) meets EPIPE while
// flushing a queue that filled the socket.

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const net = require('net');
const { once } = require('events');
const procwire = require('..');
const { uniqueName } = require('./helpers/pair');
const { withTimeout, exitOf, unlessExited, killChild } = require('./helpers/wait');

const MESSAGES = 100;

if (process.argv[2] === 'child-raw-writer') {
  // Connects without reading, so the server's queue fills the socket; then
  // writes MESSAGES frames, reads everything the server had sent (so
  // closing resets nothing: the server sees a plain hang-up, EPIPE on its
  // next write), and closes.
  const socket = net.connect(process.argv[3], () => {
    socket.pause();
    setTimeout(() => {
      const frames = [];
      for (let i = 0; i < MESSAGES; i++) frames.push(procwire.codec.advanced.encode({ i }));
      socket.write(Buffer.concat(frames), () => {
        socket.on('data', () => {});
        socket.resume();
        setTimeout(() => socket.destroy(), 300);
      });
    }, 300);
  });
  socket.on('error', () => {});
  socket.on('close', () => process.exit(0));
  setTimeout(() => process.exit(1), 20_000).unref();
  return;
}

// Blocks this thread (and so its event loop) for `ms`.
function blockFor(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

test('a peer that wrote, read what we sent and hung up: its messages arrive before the close', { timeout: 30_000 }, async (t) => {
  const name = uniqueName('gone');
  // The raw peer does not run the hello: the stream is what is tested.
  const server = procwire.listen(name, { auth: false, serialization: 'advanced', rings: 'never' });
  let ch = null;
  // In t.after, not a finally: it runs also when a wait below outlives the
  // test's time limit.
  t.after(() => {
    if (ch !== null) ch.destroy();
    server.close();
  });
  await server.ready;
  const child = childProcess.spawn(process.execPath, [__filename, 'child-raw-writer', server.address().path], { stdio: 'inherit' });
  const exited = exitOf(child);
  t.after(() => killChild(child, exited));
  // A peer that died before it connected fails the test at once.
  [ch] = await withTimeout(unlessExited(once(server, 'channel'), exited, 'its connection'), 10_000, 'the peer to connect');
  const got = [];
  const errors = [];
  ch.on('message', (m) => got.push(m.i));
  ch.on('error', (err) => errors.push(err));
  const closed = new Promise((resolve) => ch.once('close', (reason, err) => resolve([reason, err])));
  // More than the socket holds: the rest waits in the addon's queue, which
  // the addon flushes itself when the socket is writable again.
  const chunk = Buffer.alloc(64 * 1024, 1);
  for (let i = 0; i < 128; i++) ch.send({ chunk });
  // While this process is blocked the peer writes its messages, drains
  // what we had sent and hangs up, so that, when we run again, the socket
  // holds its messages and its end, and our queued bytes meet EPIPE.
  setTimeout(() => blockFor(1500), 50);
  const [reason, err] = await withTimeout(closed, 15_000, 'the close');
  assert.deepStrictEqual(got, Array.from({ length: MESSAGES }, (_, i) => i), 'every message the peer sent, in order');
  assert.strictEqual(reason, 'peer-closed', `closed with ${reason} ${err ? err.code : ''}`);
  assert.deepStrictEqual(errors.map((e) => e.code), []);
});
