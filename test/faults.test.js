'use strict';
// Crash faults: the parent dies first, the socket file is deleted under a
// live server, a sender that ignores backpressure into a stalled receiver.

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const { once } = require('events');
const procwire = require('..');
const { withTimeout, until, exitOf, killChild } = require('./helpers/wait');
const { running } = require('./helpers/pids');

if (process.argv[2] === 'child') {
  const role = process.argv[3];
  if (role === 'middle') {
    // Forks a procwire grandchild, reports its pid, then waits to be killed.
    const child = procwire.fork(__filename, ['child', 'grandchild'], { child: 'procwire', stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    child.on('message', (m) => { if (m.ready) process.stdout.write(`grandchild ${child.pid}\n`); });
    setInterval(() => {}, 1000);
  } else if (role === 'grandchild') {
    const parent = procwire.parent;
    parent.on('message', () => {});
    parent.on('close', (reason) => {
      process.stdout.write(`closed ${reason}\n`);
      // No explicit exit: the channel was the only thing keeping us alive.
    });
    parent.send({ ready: true });
    const timer = setInterval(() => parent.send({ tick: Date.now() }), 5);
    parent.on('close', () => clearInterval(timer));
  }
  return;
}

function uniqueName() {
  return `f-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
}

function alive(pid) {
  try { process.kill(pid, 0); return true; } catch { return false; }
}

test('a procwire child whose parent is killed sees the channel close and exits on its own', { timeout: 30_000 }, async (t) => {
  const middle = childProcess.spawn(process.execPath, [__filename, 'child', 'middle'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const middleExited = exitOf(middle);
  // The middle process waits to be killed, so it is killed whatever happens.
  t.after(() => killChild(middle, middleExited));
  let out = '';
  middle.stdout.on('data', (d) => { out += d; });
  await until(() => /grandchild \d+/.test(out), 10_000, 'the grandchild\'s pid', 20);
  const pid = Number(/grandchild (\d+)/.exec(out)[1]);
  // A grandchild that fails to exit on its own is killed here, after the
  // assertion below has failed.
  t.after(() => { if (alive(pid)) process.kill(pid, 'SIGKILL'); });
  assert.ok(alive(pid));
  middle.kill('SIGKILL');
  await middleExited;
  // The grandchild must notice (EOF on its channel) and exit by itself.
  // Orphaned, it is reaped by init, maybe late: exited is enough.
  let gone = false;
  for (let i = 0; i < 250 && !gone; i++) {
    await new Promise((r) => setTimeout(r, 20));
    gone = !running(pid);
  }
  assert.ok(gone, 'the orphaned procwire child exited once its parent died');
});

test('deleting the socket file under a live server: open channels go on, new connects fail cleanly, the name can be reused', { timeout: 20_000 }, async (t) => {
  // Everything this test opens, closed when it ends, also when it fails.
  const opened = [];
  t.after(() => {
    for (const thing of opened) {
      if (typeof thing.destroy === 'function') thing.destroy(); else thing.close();
    }
  });
  const name = uniqueName();
  const server = procwire.listen(name);
  opened.push(server);
  await server.ready;
  server.on('channel', (ch) => { opened.push(ch); ch.on('message', (m) => ch.send(m)); });
  const client = await procwire.connect(name);
  opened.push(client);
  const file = server.address().path;
  fs.unlinkSync(file);
  client.send({ still: 1 });
  const [m] = await withTimeout(once(client, 'message'), 30_000, 'the echo on the established channel');
  assert.deepStrictEqual(m, { still: 1 }, 'the established channel is unaffected');
  await assert.rejects(procwire.connect(name), { code: 'ERR_PROCWIRE_CONNECT_FAILED' });
  // A new server may take the name while the old one still runs.
  const second = procwire.listen(name);
  opened.push(second);
  await second.ready;
  second.on('channel', (ch) => { opened.push(ch); ch.on('message', (x) => ch.send({ second: x })); });
  const c2 = await procwire.connect(name);
  opened.push(c2);
  c2.send(1);
  const [m2] = await withTimeout(once(c2, 'message'), 30_000, 'the second server\'s echo');
  assert.deepStrictEqual(m2, { second: 1 });
  // Closing the first server must not remove the second one's file.
  server.close();
  await new Promise((r) => setTimeout(r, 20));
  c2.destroy();
  client.destroy();
  const c3 = await procwire.connect(name);
  opened.push(c3);
  c3.destroy();
  second.close();
});

test('a would-block storm (sender ignoring backpressure into a stalled receiver) loses nothing it acknowledged', { timeout: 60_000 }, async () => {
  const { client, serverSide: s, close } = await require('./helpers/pair').namedPair();
  try {
    s.pause();
    let acknowledged = 0;
    // 20 MB: more than a unix socket's send buffer holds, even widened.
    const n = 20_000;
    const payload = 'x'.repeat(1000);
    for (let i = 0; i < n; i++) client.send({ i, payload }, (err) => { if (!err) acknowledged++; });
    // Let the socket fill and stay full for a while: every flush hits EAGAIN.
    await new Promise((r) => setTimeout(r, 300));
    assert.ok(client.writableLength > 0, 'the receiver is stalled, so bytes wait');
    let expected = 0;
    let bad = 0;
    const done = new Promise((resolve) => s.on('message', (m) => {
      if (m.i !== expected++) bad++;
      if (expected === n) resolve();
    }));
    s.resume();
    // Bounded, so that the finally closes the pair also when messages are lost.
    await withTimeout(done, 45_000, `${n} messages`);
    assert.strictEqual(bad, 0);
    assert.strictEqual(acknowledged, n, 'every callback reported success');
    assert.ok(client.stats().writeCalls > 2, 'the writes were spread over many would-block rounds');
  } finally {
    close();
  }
});
