'use strict';
// procwire/register: loaded with -r, NODE_OPTIONS or --import, it makes
// child_process.fork procwire's in that process (lib/register.js). Every
// test runs real Node processes (test/fixtures/register-parent.js forking
// register-child.js) and reads what they print; the behaviour that mirrors
// Node is run side by side with the hook and without it.

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const root = path.join(__dirname, '..');
const PARENT = path.join(__dirname, 'fixtures', 'register-parent.js');
const ESM_PARENT = path.join(__dirname, 'fixtures', 'register-parent.mjs');
const EARLY = path.join(__dirname, 'fixtures', 'register-early.mjs');
const NODE_MAJOR = Number(process.versions.node.split('.')[0]);
const RUN_TIMEOUT = 30_000;
const ECHO = { echo: 'hi', registered: true };

// Runs node with `args` from the package root (where `procwire/register`
// resolves to this checkout) and returns the last JSON line it printed and
// its stderr. The hook and its opt-out are removed from the environment
// unless `env` sets them, so the test's own environment cannot leak in.
function run(args, { env = {}, timeout = RUN_TIMEOUT } = {}) {
  const base = { ...process.env };
  delete base.NODE_OPTIONS;
  delete base.PROCWIRE_REGISTER;
  delete base.NODE_DEBUG;
  const result = childProcess.spawnSync(process.execPath, args, {
    cwd: root, env: { ...base, ...env }, encoding: 'utf8', timeout, maxBuffer: 16 * 1024 * 1024,
  });
  const lines = (result.stdout || '').trim().split('\n').filter(Boolean);
  let out;
  try {
    out = lines.length > 0 ? JSON.parse(lines[lines.length - 1]) : null;
  } catch {
    out = null;
  }
  assert.ok(out !== null, `node ${args.join(' ')} printed no result (status ${result.status}, signal ${result.signal}):\n${result.stdout}\n${result.stderr}`);
  return { out, stderr: result.stderr || '' };
}

function withoutPid(out) {
  if (out.reply) delete out.reply.pid;
  return out;
}

test('--require procwire/register: a caller that looks fork up at call time gets procwire, and so does the child (execArgv)', { timeout: 60_000 }, () => {
  assert.deepStrictEqual(withoutPid(run(['-r', 'procwire/register', PARENT, 'lookup']).out), { procwire: true, reply: ECHO, code: 0 });
  assert.deepStrictEqual(withoutPid(run([PARENT, 'lookup']).out),
    { procwire: false, reply: { ...ECHO, registered: false }, code: 0 }, 'without the hook');
});

test('NODE_OPTIONS="--require procwire/register": a destructured fork made after the hook, and descendants', { timeout: 60_000 }, () => {
  const { out } = run([PARENT, 'destructured'], { env: { NODE_OPTIONS: '--require procwire/register' } });
  assert.deepStrictEqual(withoutPid(out), { procwire: true, reply: ECHO, code: 0 });
});

test('--require procwire/register: an ES module brought in by require() and its named import of fork', { timeout: 60_000 }, () => {
  assert.strictEqual(process.features.require_module, true, 'this Node line requires ES modules');
  assert.deepStrictEqual(withoutPid(run(['-r', 'procwire/register', PARENT, 'require-esm']).out), { procwire: true, reply: ECHO, code: 0 });
});

test('--require procwire/register: an entry Node detects as an ES module (no "type" in its package.json)', { timeout: 60_000 }, () => {
  const { out } = run(['-r', 'procwire/register', path.join(__dirname, 'fixtures', 'register-detected.js')]);
  assert.deepStrictEqual(withoutPid(out), { procwire: true, reply: ECHO, code: 0 });
});

test('--import procwire/register: an ES module\'s named import of fork, also one made before the hook', { timeout: 60_000 }, () => {
  assert.deepStrictEqual(withoutPid(run(['--import', 'procwire/register', ESM_PARENT]).out),
    { procwire: true, early: null, reply: ECHO, code: 0 });
  assert.deepStrictEqual(withoutPid(run(['--import', EARLY, '--import', 'procwire/register', ESM_PARENT]).out),
    { procwire: true, early: true, reply: ECHO, code: 0 });
});

test('cluster: the primary forks its workers through procwire', { timeout: 60_000 }, () => {
  const { out } = run([PARENT, 'cluster'], { env: { NODE_OPTIONS: '--require procwire/register' } });
  assert.deepStrictEqual(out, { procwire: true, reply: { worker: 1 }, code: 0 });
});

test('opting out: PROCWIRE_REGISTER=0 for the process (and its children), { procwire: false } for one call', { timeout: 60_000 }, () => {
  const off = run([PARENT, 'lookup'], { env: { NODE_OPTIONS: '--require procwire/register', PROCWIRE_REGISTER: '0' } });
  assert.deepStrictEqual(withoutPid(off.out), { procwire: false, reply: { ...ECHO, registered: false }, code: 0 });
  const call = run(['-r', 'procwire/register', PARENT, 'lookup', JSON.stringify({ procwire: false })],
    { env: { NODE_DEBUG: 'procwire' } });
  assert.deepStrictEqual(withoutPid(call.out), { procwire: false, reply: ECHO, code: 0 });
  assert.match(call.stderr, /runs Node's own fork: the call passed \{ procwire: false \}/);
});

// What procwire cannot serve goes to Node's own fork: the child still runs
// and answers, and NODE_DEBUG=procwire shows one line saying why.
function assertFallback(args, env, why) {
  const { out, stderr } = run(args, { env: { NODE_DEBUG: 'procwire', ...env } });
  assert.deepStrictEqual(withoutPid(out), { procwire: false, reply: ECHO, code: 0 });
  const lines = stderr.split('\n').filter((l) => l.includes("runs Node's own fork"));
  assert.strictEqual(lines.length, 1, `one debug line expected:\n${stderr}`);
  assert.match(lines[0], why);
}

test('another execPath falls back to Node\'s fork with one debug line', { timeout: 60_000 }, (t) => {
  // The same binary under another name: procwire cannot know what it runs.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-register-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const other = path.join(dir, 'other-node');
  fs.symlinkSync(process.execPath, other);
  assertFallback(['-r', 'procwire/register', PARENT, 'lookup', JSON.stringify({ execPath: other })], {},
    /options\.execPath is another binary/);
});

test('the permission model falls back to Node\'s fork with one debug line', { timeout: 60_000 }, () => {
  const flag = NODE_MAJOR >= 22 ? '--permission' : '--experimental-permission';
  assertFallback([flag, '--allow-fs-read=*', '--allow-child-process', '-r', 'procwire/register', PARENT, 'lookup'], {},
    /the permission model/);
});

test('without the native addon, Node\'s fork serves, with one debug line', { timeout: 60_000 }, () => {
  assertFallback(['-r', 'procwire/register', PARENT, 'lookup'], { PROCWIRE_FORCE_FALLBACK: '1' },
    /the native addon is not available/);
});

test('lazy: a process that loads the hook and never forks loads none of procwire\'s modules nor the addon', { timeout: 60_000 }, () => {
  for (const args of [['-r', 'procwire/register', PARENT, 'lazy'], ['--import', 'procwire/register', PARENT, 'lazy']]) {
    const { out } = run(args);
    assert.deepStrictEqual(out.loaded, [], `${args.join(' ')} loaded ${out.loaded.join(', ')}`);
    // Under a CommonJS entry not even child_process is loaded before
    // something asks for it, on every Node line (diagnostics channels from
    // Node 22, Module._load on Node 20).
    if (args[0] === '-r') assert.strictEqual(out.childProcess, false, 'child_process was loaded');
  }
  // The same check sees a process that forked.
  const forked = childProcess.execFileSync(process.execPath, ['-r', 'procwire/register', '-e', `
    const child = require('child_process').fork(${JSON.stringify(path.join(__dirname, 'fixtures', 'register-child.js'))}, ['burst', '1']);
    child.on('exit', () => console.log(require('fs').readFileSync('/proc/self/maps', 'utf8').split('\\n')
      .some((line) => /\\/procwire[^/]*\\.node$/.test(line))));
  `], { cwd: root, encoding: 'utf8', timeout: RUN_TIMEOUT });
  assert.strictEqual(forked.trim(), 'true');
});

test('teardown: a worker\'s last messages arrive before \'exit\' and \'close\'; send() after close never throws (side by side with Node)', { timeout: 60_000 }, (t) => {
  const count = 5000;
  for (const serialization of ['json', 'advanced']) {
    const options = JSON.stringify({ serialization });
    const node = run([PARENT, 'teardown', options, String(count)]).out;
    const hooked = run(['-r', 'procwire/register', PARENT, 'teardown', options, String(count)]).out;
    t.diagnostic(`${serialization}: Node ${JSON.stringify(node)}; register ${JSON.stringify(hooked)}`);
    assert.strictEqual(node.procwire, false);
    assert.strictEqual(hooked.procwire, true);
    for (const seen of [node, hooked]) {
      assert.strictEqual(seen.got, count, 'messages lost');
      assert.strictEqual(seen.atClose, count, 'messages after \'close\'');
      assert.strictEqual(seen.afterClose, 0);
    }
    assert.strictEqual(hooked.atExit, count, 'messages after \'exit\'');
    for (const key of ['callbackError', 'errorEvent', 'thrown']) assert.strictEqual(hooked[key], node[key], key);
    assert.deepStrictEqual([hooked.callbackError, hooked.errorEvent, hooked.thrown], ['ERR_IPC_CHANNEL_CLOSED', 'ERR_IPC_CHANNEL_CLOSED', null]);
  }
});

test('big results: 300 MiB (advanced) arrives as with Node; json longer than V8\'s longest string fails in the worker, as with Node, never a hang', { timeout: 120_000 }, (t) => {
  // procwire's own default limit (256 MiB) is not the hook's: Node carries
  // this result, so the hook does.
  const big = run(['-r', 'procwire/register', PARENT, 'big', JSON.stringify({ serialization: 'advanced' }), '300', 'buffer'],
    { timeout: 90_000 }).out;
  t.diagnostic(`300 MiB advanced with the hook: ${big.ms} ms`);
  assert.deepStrictEqual({ ...big, ms: 0 }, { procwire: true, received: 300 * 1024 * 1024, code: 0, error: null, ms: 0 });
  const json = run(['-r', 'procwire/register', PARENT, 'big', '{}', '0', 'string'], { timeout: 90_000 }).out;
  t.diagnostic(`json over V8's longest string with the hook: ${json.ms} ms, ${json.error}`);
  assert.deepStrictEqual({ ...json, ms: 0 }, { procwire: true, received: null, code: 1, error: 'RangeError: Invalid string length', ms: 0 });
});
