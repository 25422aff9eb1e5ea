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
