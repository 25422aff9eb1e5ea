'use strict';
// What a parent loads for its first fork: a structural check, not a timing
// (bench/parent-fork-start.js measures it). require('procwire') loads no
// builtin that a bare `node` has not loaded beyond the few the start bundle
// needs (vm), so none of child_process, net, dgram or streams, which the
// first fork() loads (Node's own fork loads them too), and neither loads
// procwire's parts for other uses. The hook (lib/register.js) loads nothing
// more until the first fork. When the parent's start bundle is current, a
// process started from it has the same modules as one started without it,
// and compiles it with the code cache made for its V8.

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const fs = require('fs');
const path = require('path');

const root = path.join(__dirname, '..');
const PARENT = path.join(__dirname, 'fixtures', 'parent-start.js');
const NOT_AT_FIRST_FORK = [
  /^lib[\\/]codec[\\/]advanced-fast\.js$/, /^lib[\\/]fallback[\\/]/, /^lib[\\/]framer\.js$/, /^lib[\\/]pool[\\/]/,
  /^lib[\\/]transport[\\/](index|socket|tls|stream|server|fallback)\.js$/, /^lib[\\/]transport[\\/]nats[\\/]/,
  /^lib[\\/]cluster\.js$/, /^lib[\\/]security[\\/]/, /^lib[\\/]auth\.js$/,
];
// Loaded by Node's child_process, so by the first fork() and not before.
const FORK_BUILTINS = ['child_process', 'net', 'dgram', 'stream'];
const NEVER_BUILTINS = ['v8', 'worker_threads', 'tls', 'http'];

// The builtins a bare `node` of this line has loaded once it runs user code.
const bare = new Set(JSON.parse(childProcess.execFileSync(process.execPath,
  ['-p', 'JSON.stringify(process.moduleLoadList)'], { encoding: 'utf8', timeout: 30_000 })));

// A fresh parent's report (see test/fixtures/parent-start.js).
function firstFork(way, env = process.env) {
  const args = way === 'hook' ? ['-r', path.join(root, 'lib', 'register.js'), PARENT, way] : [PARENT, way];
  return JSON.parse(childProcess.execFileSync(process.execPath, args, { encoding: 'utf8', env, timeout: 30_000 }));
}

function newBuiltins(loaded, names) {
  return names.filter((b) => loaded.builtins.includes(`NativeModule ${b}`) && !bare.has(`NativeModule ${b}`));
}

function check(what, report) {
  assert.deepStrictEqual(newBuiltins(report.beforeFork, [...FORK_BUILTINS, ...NEVER_BUILTINS]), [],
    `${what} loaded these builtins before its first fork`);
  assert.deepStrictEqual(newBuiltins(report.afterAnswer, NEVER_BUILTINS), [],
    `${what} loaded these builtins by its first child's answer`);
  const extra = report.afterAnswer.files.filter((f) => NOT_AT_FIRST_FORK.some((re) => re.test(f)));
  assert.deepStrictEqual(extra, [], `${what} loaded ${extra.join(', ')} for its first fork`);
  const forkSurface = report.beforeFork.files.filter((f) => f.startsWith(path.join('lib', 'child-process', 'index.js')));
  assert.deepStrictEqual(forkSurface, [], `${what} loaded the ChildProcess surface before its first fork`);
}

test('require(\'procwire\') and its first fork load only what that fork needs', { timeout: 60_000 }, () => {
  check('require(\'procwire\')', firstFork('index'));
});

test('the hook loads nothing of procwire until the first fork, and then what require(\'procwire\') would', { timeout: 60_000 }, () => {
  const report = firstFork('hook');
  assert.deepStrictEqual(report.beforeFork.files, [path.join('lib', 'register.js')]);
  check('the hook', report);
});

const startBundle = require('../lib/start-bundle');
const { traceParentFiles, render } = require('../scripts/build-start-bundle');

test('the parent\'s start bundle, when in use, is what the sources make, and holds the first fork\'s path', { timeout: 60_000 }, (t) => {
  if (startBundle.currentBundle('parent-start') === null) {
    t.skip('no current parent start bundle (npm run build makes it)');
    return;
  }
  const { bundle, manifest } = startBundle.bundleFiles('parent-start');
  const { sources, holdsToo } = JSON.parse(fs.readFileSync(manifest, 'utf8'));
  const bundled = Object.keys(sources);
  // It also holds the copies of the child's bundle's sources it lacks.
  assert.strictEqual(fs.readFileSync(bundle, 'utf8'), render(bundled, Object.keys(holdsToo)),
    'build/parent-start-bundle.js is not what scripts/build-start-bundle.js makes of its sources now');
  const missing = traceParentFiles().filter((f) => !bundled.includes(f));
  assert.deepStrictEqual(missing, [], 'the first fork loads files the bundle lacks: npm run build');
});

test('a parent started from its start bundle has the modules it would have without it', { timeout: 60_000 }, (t) => {
  if (startBundle.currentBundle('parent-start') === null) {
    t.skip('no current parent start bundle (npm run build makes it)');
    return;
  }
  for (const way of ['index', 'hook']) {
    const withBundle = firstFork(way);
    const without = firstFork(way, { ...process.env, PROCWIRE_START_BUNDLE: '0' });
    assert.notStrictEqual(withBundle.bundle, null, `${way}: the bundle was not used`);
    assert.strictEqual(without.bundle, null, `${way}: PROCWIRE_START_BUNDLE=0 did not turn the bundle off`);
    assert.deepStrictEqual(withBundle.afterAnswer.files.sort(), without.afterAnswer.files.sort(), way);
    assert.deepStrictEqual(withBundle.beforeFork.files.sort(), without.beforeFork.files.sort(), way);
    // The build made a cache with this Node (npm run build, or
    // scripts/build-for.sh for another line); V8 took it.
    if (fs.existsSync(withBundle.bundle.cacheFile)) assert.strictEqual(withBundle.bundle.cacheUsed, true, way);
  }
});
