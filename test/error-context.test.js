'use strict';
// Errors that reach user code later carry what a user needs to act on them:
// the caller's frames, which child died and how (pid, exit code or signal,
// the end of its piped stderr), where a connect() went, and whether a
// request timed out while its child was still starting. A connect() failure
// its promise delivers is not also printed as a process warning, and a child
// that needs a procwire parent and has none gets a coded error saying how to
// fork it. Every case runs real children and sockets; each fails on the code
// before these changes (no such fields, a warning per failed connect, a
// TypeError from `procwire.parent.respond`).

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const net = require('net');
const childProcess = require('child_process');
const procwire = require('..');
const { withTimeout, exitOf, killChild } = require('./helpers/wait');

const root = path.join(__dirname, '..');

function tempDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-errctx-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// A child that takes requests and never answers, writes to stderr, then
// exits with code 3 once told to (a message), so the test decides when.
const DYING_CHILD = `
const parent = require(${JSON.stringify(root)}).requireParent();
parent.respond(() => new Promise(() => {}));
parent.on('message', (m) => {
  if (m === 'die') { process.stderr.write('boom: the child is dying\\n', () => process.exit(3)); }
});
parent.send('ready');
`;

test('a request the child\'s death rejects names the child, its exit code and its stderr tail', { timeout: 60_000 }, async (t) => {
  const file = path.join(tempDir(t), 'dying.js');
  fs.writeFileSync(file, DYING_CHILD);
  const child = procwire.fork(file, { child: 'procwire', silent: true });
  t.after(() => killChild(child));
  const exited = exitOf(child);
  await withTimeout(new Promise((resolve) => child.once('message', resolve)), 30_000, 'the child\'s ready');
  async function callerOfRequest() {
    return await child.request('work', { timeout: 0 });
  }
  const pending = callerOfRequest();
  child.send('die');
  const err = await withTimeout(pending.then(() => null, (e) => e), 30_000, 'the request\'s rejection');
  assert.ok(err, 'the request rejected');
  assert.strictEqual(err.code, 'ERR_PROCWIRE_CHANNEL_CLOSED');
  assert.strictEqual(err.pid, child.pid);
  assert.strictEqual(err.exitCode, 3);
  assert.strictEqual(err.signalCode, null);
  assert.match(err.stderr, /boom: the child is dying/);
  assert.match(err.message, new RegExp(`child ${child.pid} exited with code 3`));
  assert.match(err.stack, /callerOfRequest/, 'the caller\'s frame is in the stack');
  await exited;
});

test('a child killed by a signal: the rejection says which signal', { timeout: 60_000 }, async (t) => {
  const file = path.join(tempDir(t), 'dying.js');
  fs.writeFileSync(file, DYING_CHILD);
  const child = procwire.fork(file, { child: 'procwire' });
  t.after(() => killChild(child));
  await withTimeout(new Promise((resolve) => child.once('message', resolve)), 30_000, 'the child\'s ready');
  const pending = child.request('work', { timeout: 0 }).then(() => null, (e) => e);
  child.kill('SIGKILL');
  const err = await withTimeout(pending, 30_000, 'the request\'s rejection');
  assert.strictEqual(err.pid, child.pid);
  assert.strictEqual(err.exitCode, null);
  assert.strictEqual(err.signalCode, 'SIGKILL');
  assert.strictEqual(err.stderr, undefined, 'stderr was not piped');
  assert.match(err.message, /killed by SIGKILL/);
});

// A TCP port nothing listens on: bound, then closed.
async function deadPort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = /** @type {net.AddressInfo} */ (server.address());
  await new Promise((resolve) => server.close(resolve));
  return port;
}

test('a refused TCP connect names the address, shows the caller, and prints no warning', { timeout: 30_000 }, async () => {
  const port = await deadPort();
  const warnings = [];
  const onWarning = (w) => warnings.push(w);
  process.on('warning', onWarning);
  try {
    async function callerOfConnect() {
      return await procwire.connect({ port, host: '127.0.0.1' }, { auth: false });
    }
    const err = await callerOfConnect().then(() => null, (e) => e);
    assert.ok(err, 'connect rejected');
    assert.strictEqual(err.code, 'ERR_PROCWIRE_CONNECT_FAILED');
    assert.strictEqual(err.address, '127.0.0.1');
    assert.strictEqual(err.port, port);
    assert.match(err.message, new RegExp(`127\\.0\\.0\\.1:${port}`));
    assert.match(err.stack, /callerOfConnect/);
    // Warnings are emitted on the next tick; give them a turn of the loop.
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepStrictEqual(warnings.map((w) => w.message), []);
  } finally {
    process.off('warning', onWarning);
  }
});

test('a unix connect to a missing name names the path', { timeout: 30_000 }, async () => {
  const err = await procwire.connect({ path: path.join(os.tmpdir(), `procwire-none-${process.pid}.sock`) }, { auth: false })
    .then(() => null, (e) => e);
  assert.strictEqual(err.code, 'ERR_PROCWIRE_CONNECT_FAILED');
  assert.match(err.address, /procwire-none-/);
  assert.ok(err.message.includes(err.address));
});

test('a request that times out before the child sent anything says the child may still be starting', { timeout: 60_000 }, async (t) => {
  const file = path.join(tempDir(t), 'slow.js');
  // The child takes its time before it loads procwire: it is "starting".
  fs.writeFileSync(file, `setTimeout(() => require(${JSON.stringify(root)}).requireParent().respond((v) => v), 60000);`);
  const child = procwire.fork(file, { child: 'procwire' });
  t.after(() => killChild(child));
  const err = await child.request('x', { timeout: 50 }).then(() => null, (e) => e);
  assert.strictEqual(err.code, 'ERR_PROCWIRE_REQUEST_TIMEOUT');
  assert.match(err.message, /still be starting/);
});

test('requireParent() in a child forked without { child: \'procwire\' } throws ERR_PROCWIRE_NO_PARENT naming the fix', { timeout: 60_000 }, async (t) => {
  const file = path.join(tempDir(t), 'needs-parent.js');
  fs.writeFileSync(file, `
const procwire = require(${JSON.stringify(root)});
if (procwire.parent) throw new Error('parent must stay null here');
try { procwire.requireParent(); } catch (err) { process.send({ code: err.code, message: err.message }); }
process.disconnect();
`);
  for (const mode of ['native', 'node']) {
    const child = procwire.fork(file, { child: mode });
    t.after(() => killChild(child));
    const got = await withTimeout(new Promise((resolve) => child.once('message', resolve)), 30_000, `the ${mode} child's report`);
    assert.strictEqual(got.code, 'ERR_PROCWIRE_NO_PARENT', mode);
    assert.match(got.message, /child: 'procwire'/);
    assert.match(got.message, /Node IPC channel/);
  }
  // And a process with no IPC at all: the same code, saying so.
  const r = childProcess.spawnSync(process.execPath, ['-e',
    `try { require(${JSON.stringify(root)}).requireParent(); } catch (e) { console.log(e.code, e.message); }`],
  { encoding: 'utf8', timeout: 30_000 });
  assert.match(r.stdout, /^ERR_PROCWIRE_NO_PARENT .*no IPC channel/);
});

test('a child that uses procwire.parent without a procwire parent dies with a hint naming the fix', { timeout: 60_000 }, async (t) => {
  const file = path.join(tempDir(t), 'uses-parent.js');
  fs.writeFileSync(file, `const procwire = require(${JSON.stringify(root)});\nprocwire.parent.on('message', () => {});\n`);
  const child = procwire.fork(file, { silent: true });
  t.after(() => killChild(child));
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const { code } = await withTimeout(exitOf(child), 30_000, 'the child to exit');
  assert.notStrictEqual(code, 0);
  assert.match(stderr, /TypeError: Cannot read properties of null \(reading 'on'\)/, 'Node\'s own report stays');
  assert.match(stderr, /procwire\.parent is null in this process: its parent forked it without \{ child: 'procwire' \}/);
  // And `if (procwire.parent)` still just reads null there.
  const guarded = path.join(tempDir(t), 'guarded.js');
  fs.writeFileSync(guarded, `const procwire = require(${JSON.stringify(root)});\nprocess.send({ parent: procwire.parent === null ? 'null' : 'set' });\nprocess.disconnect();\n`);
  const second = procwire.fork(guarded);
  t.after(() => killChild(second));
  const got = await withTimeout(new Promise((resolve) => second.once('message', resolve)), 30_000, 'the guarded child\'s report');
  assert.deepStrictEqual(got, { parent: 'null' });
});
