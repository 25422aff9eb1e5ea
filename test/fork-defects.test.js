'use strict';
// fork() defects from issue 29, each side by side with child_process.fork:
// the 'native' preload must not reach helpers a user's preload spawns, send()
// to a dead peer fails with EPIPE as in Node, and messages held for a
// 'message' listener stay within the channel's backlog bound. Real child
// processes throughout.

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const path = require('path');
const procwire = require('..');
const { withTimeout } = require('./helpers/wait');

const TIMEOUT = { timeout: 60000 };
const native = procwire.native;
const FIXTURES = path.join(__dirname, 'fixtures');

// The first message of a child started by `forkFn`, and its exit.
async function reportOf(forkFn, file, options) {
  const child = forkFn(path.join(FIXTURES, file), options);
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  try {
    const message = await withTimeout(new Promise((resolve) => child.once('message', resolve)), 40000,
      `the report of ${file}`);
    return { message, exit: await withTimeout(exited, 20000, `the exit of ${file}`) };
  } finally {
    child.kill('SIGKILL');
  }
}

for (const [kind, preload] of [['--require', 'preload-spawner.js'], ['--import', 'preload-spawner.mjs']]) {
  test(`a helper spawned by a user's ${kind} preload gets no channel, under Node and procwire`, TIMEOUT, async () => {
    const env = { ...process.env, NODE_OPTIONS: `${kind} ${JSON.stringify(path.join(FIXTURES, preload))}` };
    const clean = { status: 0, stdout: JSON.stringify({ leaked: [], send: 'undefined', channel: false }), stderr: '' };
    const underNode = await reportOf(childProcess.fork, 'preload-report.js', { env });
    assert.deepStrictEqual(underNode.message.helper, clean);
    assert.deepStrictEqual(underNode.exit, { code: 0, signal: null });
    const underProcwire = await reportOf(procwire.fork, 'preload-report.js', { env });
    assert.deepStrictEqual(underProcwire.message.helper, clean);
    assert.deepStrictEqual(underProcwire.exit, { code: 0, signal: null });
    // The child itself still has its channel, procwire's own where the addon
    // serves it.
    assert.strictEqual(underProcwire.message.channel, native ? 'Channel' : underNode.message.channel);
  });
}

// The JSON lines test/fixtures/dead-peer.js prints in `role`, once its
// stdout closes (which the orphan of `grandparent` holds open too); `onLine`
// sees each as it comes.
function deadPeerRun(args, onLine = () => {}) {
  const child = childProcess.spawn(process.execPath, [path.join(FIXTURES, 'dead-peer.js'), ...args],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  const events = [];
  let text = '';
  let stderr = '';
  child.stderr.on('data', (chunk) => { stderr += chunk; });
  child.stdout.on('data', (chunk) => {
    text += chunk;
    let newline;
    while ((newline = text.indexOf('\n')) !== -1) {
      const event = JSON.parse(text.slice(0, newline));
      text = text.slice(newline + 1);
      events.push(event);
      onLine(event, child);
    }
  });
  const closed = new Promise((resolve) => child.stdout.once('close', resolve));
  return withTimeout(closed, 40000, `dead-peer.js ${args.join(' ')}`)
    .then(() => ({ events, stderr }))
    .finally(() => child.kill('SIGKILL'));
}

for (const childMode of ['native', 'node']) {
  for (const cb of ['cb', 'nocb']) {
    test(`send() from the parent to a dead ${childMode} child (${cb}) fails with EPIPE as Node's`, TIMEOUT, async () => {
      const underNode = await deadPeerRun(['parent', 'node', cb]);
      const underProcwire = await deadPeerRun(['parent', 'procwire', cb, childMode]);
      assert.deepStrictEqual(underProcwire.events, underNode.events);
      const epipe = { message: 'write EPIPE', code: 'EPIPE', errno: -32, syscall: 'write' };
      if (cb === 'cb') {
        assert.deepStrictEqual(underNode.events.find((e) => e.event === 'callback'), { event: 'callback', err: epipe });
      } else {
        // Unhandled 'error': the parent exits 1, with Node's error.
        assert.deepStrictEqual(underNode.events.at(-1), { event: 'parent-exit', code: 1 });
        assert.match(underProcwire.stderr, /Error: write EPIPE/);
        assert.match(underProcwire.stderr, /code: 'EPIPE'/);
      }
    });

    test(`send() from a ${childMode} child whose parent was SIGKILLed (${cb}) fails with EPIPE as Node's`, TIMEOUT, async () => {
      const killOnReady = (event, child) => { if (event.event === 'ready') child.kill('SIGKILL'); };
      const underNode = await deadPeerRun(['grandparent', 'node', cb], killOnReady);
      const underProcwire = await deadPeerRun(['grandparent', 'procwire', cb, childMode], killOnReady);
      const withoutPid = (events) => events.map((e) => (e.event === 'ready' ? { event: 'ready' } : e));
      assert.deepStrictEqual(withoutPid(underProcwire.events), withoutPid(underNode.events));
      // With nothing handling the error, the child dies at that send, as
      // a plain Node child does, although an interval holds its loop.
      assert.deepStrictEqual(underNode.events.at(-1), { event: 'child-exit', code: cb === 'cb' ? 0 : 1 });
    });
  }
}

// Messages wait for a 'message' listener within the channel's backlog bound
// (10,000 messages or 64 MiB; reading stops, nothing is dropped). The wake-up
// that crosses it still delivers what it read (up to 32 reads, 8 MiB): some
// 34,000 of these tiny messages at most here. Before the fix all were read.
const BACKLOG_BOUND = 10000;
const HELD_SLACK = 50000;
const FLOOD = 200000;

// Polls `read()` until it reaches `total` or has stopped, past the bound,
// for half a second -> the count then.
async function whereReadingStops(read, total) {
  let last = -1;
  let still = 0;
  const deadline = Date.now() + 30000;
  for (;;) {
    const now = read();
    still = now === last ? still + 1 : 0;
    last = now;
    if (now >= total || (now >= BACKLOG_BOUND && still >= 10)) return now;
    if (Date.now() > deadline) throw new Error(`reading neither stopped nor finished (${now} read)`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

for (const childMode of ['native', 'node']) {
  test(`a ${childMode} child's messages wait for the parent's 'message' listener within the backlog bound`, TIMEOUT, async (t) => {
    const child = procwire.fork(path.join(FIXTURES, 'backlog.js'), ['flood', String(FLOOD)], { child: childMode });
    t.after(() => child.kill('SIGKILL'));
    const held = await whereReadingStops(() => child.channel.stats().messagesIn, FLOOD);
    assert.ok(held < BACKLOG_BOUND + HELD_SLACK, `${held} messages read with no listener`);
    let next = 0;
    await withTimeout(new Promise((resolve, reject) => {
      child.on('message', (m) => {
        if (m !== next) reject(new Error(`message ${m} came as number ${next}`));
        if (++next === FLOOD) resolve();
      });
    }), 40000, `all ${FLOOD} messages`);
    child.send('done');
  });
}

test("messages to a 'native' child wait for its 'message' listener within the backlog bound", TIMEOUT, async (t) => {
  const child = procwire.fork(path.join(FIXTURES, 'backlog.js'), ['hold', String(FLOOD)], { child: 'native' });
  t.after(() => child.kill('SIGKILL'));
  const reports = [];
  child.on('message', (m) => reports.push(m));
  await withTimeout(new Promise((resolve) => child.once('message', resolve)), 20000, 'ready');
  for (let i = 0; i < FLOOD; i++) child.send(i);
  await withTimeout(new Promise((resolve) => child.once('message', resolve)), 40000, 'the report');
  const report = reports.at(-1);
  assert.deepStrictEqual({ ...report, heldRead: undefined }, { heldRead: undefined, received: FLOOD, inOrder: true });
  assert.ok(report.heldRead < BACKLOG_BOUND + HELD_SLACK, `${report.heldRead} messages read with no listener`);
});

test("a child started with --expose-internals gets Node's channel handle, as under Node", TIMEOUT, async () => {
  const options = { execArgv: ['--expose-internals'], stdio: ['ignore', 'ignore', 'pipe', 'ipc'] };
  const underNode = await reportOf(childProcess.fork, 'channel-handle.js', options);
  const underProcwire = await reportOf(procwire.fork, 'channel-handle.js', options);
  assert.deepStrictEqual(underNode, { message: { handle: 'object' }, exit: { code: 0, signal: null } });
  assert.deepStrictEqual(underProcwire, underNode);
});
