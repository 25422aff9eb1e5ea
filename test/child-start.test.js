'use strict';
// What a forked child loads before its first answer (the goal: a bare
// procwire.fork start no slower than child_process.fork's). A structural
// check, not a timing: the child's start loads only what its first message
// needs, so none of procwire's parts for other uses (the advanced fast path,
// the JavaScript codec, framer, pools, listeners, cluster, security), and no
// builtin a bare `node` has not loaded that Node's own child IPC would not
// need either (child_process, net, dgram, v8, worker_threads). The speed
// itself is measured by bench/fork-start.js.

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const procwire = require('..');

const CHILD = path.join(__dirname, 'fixtures', 'start-child.js');
const NOT_AT_START = [
  /^lib[\\/]codec[\\/]advanced-fast\.js$/, /^lib[\\/]fallback[\\/]/, /^lib[\\/]framer\.js$/, /^lib[\\/]pool[\\/]/,
  /^lib[\\/]transport[\\/](index|socket|tls|stream|server|fallback)\.js$/, /^lib[\\/]transport[\\/]nats[\\/]/,
  /^lib[\\/]cluster\.js$/, /^lib[\\/]security[\\/]/, /^lib[\\/]auth\.js$/,
];
const BUILTINS = ['child_process', 'net', 'dgram', 'v8', 'worker_threads'];

// The builtins a bare `node` of this line has loaded once it runs user code.
const bare = new Set(JSON.parse(childProcess.execFileSync(process.execPath,
  ['-p', 'JSON.stringify(process.moduleLoadList)'], { encoding: 'utf8', timeout: 30_000 })));

async function firstAnswer(child, procwireMode) {
  const exited = new Promise((resolve, reject) => {
    child.once('exit', (code, signal) => reject(new Error(`the child exited (${code ?? signal}) before answering`)));
  });
  const answer = procwireMode
    ? child.request(0, { timeout: 30_000 })
    : new Promise((resolve) => {
      child.once('message', resolve);
      child.send(0);
    });
  try {
    return await Promise.race([answer, exited]);
  } finally {
    child.kill();
  }
}

function check(what, loaded) {
  const extra = loaded.files.filter((f) => NOT_AT_START.some((re) => re.test(f)));
  assert.deepStrictEqual(extra, [], `${what} loaded ${extra.join(', ')} at start`);
  const builtins = BUILTINS.filter((b) => loaded.builtins.includes(`NativeModule ${b}`) && !bare.has(`NativeModule ${b}`));
  assert.deepStrictEqual(builtins, [], `${what} loaded the builtins ${builtins.join(', ')} at start`);
}

test('a native child (the default) loads only what its first message needs', { timeout: 60_000 }, async () => {
  const child = procwire.fork(CHILD, ['plain']);
  const loaded = await firstAnswer(child, false);
  assert.ok(loaded.files.includes(path.join('lib', 'child-preload.js')), 'the child ran the preload');
  check('a native child', loaded);
});

test('a procwire child (procwire.parent) loads only what its first message needs', { timeout: 60_000 }, async () => {
  const child = procwire.fork(CHILD, ['procwire'], { child: 'procwire' });
  check('a procwire child', await firstAnswer(child, true));
});

test('an advanced native child loads the advanced fast path only when its channel is advanced', { timeout: 60_000 }, async () => {
  const child = procwire.fork(CHILD, ['plain'], { serialization: 'advanced' });
  const loaded = await firstAnswer(child, false);
  assert.ok(loaded.files.includes(path.join('lib', 'codec', 'advanced-fast.js')), 'advanced-fast was not loaded');
});

// The start bundle (build/child-start-bundle.js, see lib/start-bundle.js) is
// made by `npm run build`; a checkout without it starts children the
// ordinary way.
const startBundle = require('../lib/start-bundle');
const { copyLibAndBundles } = require('./helpers/bundle-copy');
const { traceStartFiles, render } = require('../scripts/build-start-bundle');

test('the start bundle, when in use, is what the sources make, and holds the start path', { timeout: 60_000 }, async (t) => {
  if (startBundle.currentBundle() === null) {
    t.skip('no current start bundle (npm run build makes it)');
    return;
  }
  const bundled = Object.keys(JSON.parse(fs.readFileSync(startBundle.MANIFEST, 'utf8')).sources);
  assert.strictEqual(fs.readFileSync(startBundle.BUNDLE, 'utf8'), render(bundled),
    'build/child-start-bundle.js is not what scripts/build-start-bundle.js makes of its sources now');
  // On this Node line too, a child's start loads nothing the bundle lacks.
  const missing = (await traceStartFiles()).filter((f) => !bundled.includes(f));
  assert.deepStrictEqual(missing, [], 'the start path has files the bundle lacks: npm run build');
});

// Each bundled module is in require.cache under its own file, so that a
// child's later require() of it gets the same module.
test('a child started from the start bundle has the modules it would have without it', { timeout: 60_000 }, async (t) => {
  if (startBundle.currentBundle() === null) {
    t.skip('no current start bundle (npm run build makes it)');
    return;
  }
  const withBundle = await firstAnswer(procwire.fork(CHILD, ['plain']), false);
  const without = await firstAnswer(procwire.fork(CHILD, ['plain'], { env: { ...process.env, PROCWIRE_START_BUNDLE: '0' } }), false);
  const starter = path.join('lib', 'start-bundle.js');
  assert.ok(withBundle.files.includes(starter) && !without.files.includes(starter), 'PROCWIRE_START_BUNDLE=0 did not turn the bundle off');
  assert.deepStrictEqual(withBundle.files.filter((f) => f !== starter).sort(), without.files.sort());
});

// A parent decides once whether the bundle is current; a rebuild (node-gyp
// removes build/) may take the bundle away while that parent still forks.
// Its children then start the ordinary way instead of failing in the
// preload. Run on a copy of lib/ and build/, so this checkout's bundle stays.
test('a child whose bundle went away after its parent found it current starts without it', { timeout: 60_000 }, async (t) => {
  const { addonFile } = require('../lib/native');
  if (startBundle.currentBundle() === null || addonFile === null) {
    t.skip('no current start bundle or no addon (npm run build makes them)');
    return;
  }
  const copy = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-bundle-gone-'));
  t.after(() => fs.rmSync(copy, { recursive: true, force: true }));
  fs.cpSync(path.join(__dirname, '..', 'lib'), path.join(copy, 'lib'), { recursive: true });
  fs.mkdirSync(path.join(copy, 'build', 'Release'), { recursive: true });
  // The copies of lib/ and of the bundles are what the bundles were made
  // from, so the copy's child bundle is current (its sources' copies are in
  // the parent's bundle).
  for (const name of ['child-start', 'parent-start']) {
    const { bundle, manifest } = startBundle.bundleFiles(name);
    for (const f of [bundle, manifest]) fs.copyFileSync(f, path.join(copy, 'build', path.basename(f)));
  }
  fs.copyFileSync(addonFile, path.join(copy, 'build', 'Release', 'procwire.node'));
  // The child answers with how it started: from the bundle or from lib/.
  fs.writeFileSync(path.join(copy, 'child.js'), `const start = require.cache[${JSON.stringify(path.join(copy, 'lib', 'start-bundle.js'))}];
    process.once('message', () => process.send(start === undefined || start.exports.childStarted.cacheFile === null ? 'lib' : 'bundle'));`);
  fs.writeFileSync(path.join(copy, 'parent.js'), `
    const fs = require('fs');
    const procwire = require('./lib');
    const answer = () => new Promise((resolve) => {
      const child = procwire.fork(${JSON.stringify(path.join(copy, 'child.js'))});
      child.once('message', (how) => { child.kill(); resolve(how); });
      child.once('exit', (code, signal) => resolve('exited ' + (code ?? signal)));
      child.send(0);
    });
    (async () => {
      const first = await answer();
      fs.rmSync(require('./lib/start-bundle').BUNDLE);
      console.log(JSON.stringify([first, await answer()]));
    })();`);
  const out = childProcess.execFileSync(process.execPath, [path.join(copy, 'parent.js')], { encoding: 'utf8', timeout: 50_000 });
  assert.deepStrictEqual(JSON.parse(out), ['bundle', 'lib']);
});

// A bundle is current only while every file it holds is byte for byte what
// it was made from: an edit that keeps a file's size (a patched constant)
// makes both bundles not current, as does a bundle that is not all there,
// or a child's bundle beside a parent's of another build.
// Run on a copy of lib/ and build/'s bundles, so this checkout's stay.
test('a bundle whose file changed, even keeping its size, is not current', { timeout: 60_000 }, (t) => {
  if (startBundle.currentBundle() === null || startBundle.currentBundle('parent-start') === null) {
    t.skip('no current start bundles (npm run build makes them)');
    return;
  }
  const copy = copyLibAndBundles(t, 'procwire-bundle-edit-');
  // The copy's own lib/start-bundle.js, in a fresh process.
  const current = () => JSON.parse(childProcess.execFileSync(process.execPath, ['-p',
    `const s = require(${JSON.stringify(path.join(copy, 'lib', 'start-bundle.js'))});
     JSON.stringify(['child-start', 'parent-start'].map((name) => s.currentBundle(name) !== null))`],
  { encoding: 'utf8', env: { ...process.env, PROCWIRE_START_BUNDLE: 'build' }, timeout: 30_000 }));
  assert.deepStrictEqual(current(), [true, true], 'the copy\'s bundles are current');
  const errors = path.join(copy, 'lib', 'errors.js');
  const text = fs.readFileSync(errors, 'latin1');
  const at = text.indexOf('// ');
  fs.writeFileSync(errors, `${text.slice(0, at)}//-${text.slice(at + 3)}`, 'latin1');
  assert.strictEqual(fs.statSync(errors).size, Buffer.byteLength(text, 'latin1'));
  assert.deepStrictEqual(current(), [false, false], 'lib/errors.js changed, its size kept');
  fs.writeFileSync(errors, text, 'latin1');
  assert.deepStrictEqual(current(), [true, true], 'lib/errors.js as it was');
  // The child's sources' copies are in the parent's bundle of its own build
  // only: a child's manifest that names another is not current.
  const childManifest = path.join(copy, 'build', 'child-start.json');
  const manifestText = fs.readFileSync(childManifest, 'utf8');
  const { hash } = JSON.parse(manifestText).copiesIn;
  fs.writeFileSync(childManifest, manifestText.replace(hash, '0'.repeat(hash.length)));
  assert.deepStrictEqual(current(), [false, true], 'a child bundle of another build than the parent\'s');
  fs.writeFileSync(childManifest, manifestText);
  fs.truncateSync(path.join(copy, 'build', 'child-start-bundle.js'), 1000);
  assert.deepStrictEqual(current(), [false, true], 'a cut child bundle');
});
