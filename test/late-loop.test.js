'use strict';
// A request whose reply came while this process's event loop was blocked is
// answered, not timed out, and a timeout says how late the loop was
// (err.loopDelay), so a caller can tell a late loop from a silent peer.
// Real processes: a procwire child that answers at once.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const procwire = require('..');
const wait = require('./helpers/wait');

const root = path.join(__dirname, '..');

function block(ms) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // The loop is blocked on purpose: the reply reaches the socket meanwhile.
  }
}

// Blocks this process's loop until `file` exists (the child wrote it once its
// answer was out), for at least `minMs` and at most 20 s: on a loaded machine
// the child may need longer than any fixed time to answer.
function blockUntilFile(file, minMs) {
  const start = Date.now();
  while (Date.now() - start < minMs || (!fs.existsSync(file) && Date.now() - start < 20_000)) {
    // The loop is blocked on purpose: the reply reaches the socket meanwhile.
  }
}

function answeringChild(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-late-'));
  const file = path.join(dir, 'answer.js');
  // After answering, the child marks (a turn later, once its reply was
  // written) that the answer is out.
  fs.writeFileSync(file, `const fs = require('fs');\n` +
    `require(${JSON.stringify(root)}).parent.respond((v) => {\n` +
    `  setImmediate(() => fs.writeFileSync(${JSON.stringify(path.join(dir, 'answered-'))} + v, ''));\n` +
    `  return v + '!';\n` +
    `});\n`);
  const child = procwire.fork(file, { child: 'procwire' });
  const exited = wait.exitOf(child);
  t.after(async () => {
    if (child.signalCode === null && child.exitCode === null) child.kill('SIGCONT');
    await wait.killChild(child, exited);
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { child, exited, answered: (v) => path.join(dir, `answered-${v}`) };
}

test('a reply that arrived while the loop was blocked past the timeout is delivered', { timeout: 30_000 }, async (t) => {
  const { child, exited, answered } = answeringChild(t);
  assert.strictEqual(await wait.unlessExited(child.channel.request('warm', { timeout: 10_000 }), exited, 'the first reply'), 'warm!');
  // The loop stays blocked past the timeout until the peer has answered, so
  // when it comes back the reply is waiting in the socket or the ring.
  const pending = child.channel.request('late', { timeout: 100 });
  // A send may wait for the end of its tick to be written: let it go first.
  await new Promise((resolve) => setImmediate(resolve));
  blockUntilFile(answered('late'), 1000);
  assert.strictEqual(await pending, 'late!');
});

test('a silent peer still times out, and the error tells how late this loop was', { timeout: 30_000 }, async (t) => {
  const { child, exited } = answeringChild(t);
  assert.strictEqual(await wait.unlessExited(child.channel.request('warm', { timeout: 10_000 }), exited, 'the first reply'), 'warm!');
  child.kill('SIGSTOP');
  // Blocked: the timer fires about 300 ms late.
  const late = child.channel.request('x', { timeout: 50 });
  block(350);
  await assert.rejects(late, (err) => err.code === 'ERR_PROCWIRE_REQUEST_TIMEOUT' && err.loopDelay >= 200 &&
    /event loop was \d+ ms late/.test(err.message));
  // Not blocked: the error has a loopDelay all the same, a number.
  await assert.rejects(child.channel.request('y', { timeout: 50 }),
    (err) => err.code === 'ERR_PROCWIRE_REQUEST_TIMEOUT' && Number.isInteger(err.loopDelay) && err.loopDelay >= 0);
  child.kill('SIGCONT');
});
