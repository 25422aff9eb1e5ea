'use strict';
// A native child's preload when the start bundle is current (lib/fork.js
// chooses it through lib/start-bundle.js): runs lib/child-preload.js and
// the modules it loads before the first answer from build/child-start-bundle.js,
// one file that scripts/build-start-bundle.js generates from lib/, instead of
// having Node's loader find, stat, resolve, read and compile each of them.
// Each module is made as Node's loader makes it and goes into require.cache
// under its own file name, so a later require() of the same file (the
// child's own require('procwire'), say) gets the same module; builtins, the
// addon and modules loaded later go through the real require().
//
// The bundle is compiled with the V8 code cache the build made for this V8,
// when there is one: it holds the functions the child compiled on its way
// to the first answer, so this child compiles none of them again. V8 refuses
// a cache from another V8 or other flags, and the bundle is then compiled
// from source. The cache's name carries the bundle's hash, so a cache is
// only ever used with the bundle it was made from.

const fs = require('fs');
const path = require('path');
const Module = require('module');
const vm = require('vm');

const root = path.join(__dirname, '..');
const BUNDLE = path.join(root, 'build', 'child-start-bundle.js');
// Set only by scripts/build-start-bundle.js, in the child it forks to make
// the cache.
const ENV_CACHE_OUT = 'PROCWIRE_START_CACHE_OUT';
const HASH_LINE = /^\/\/ sources ([0-9a-f]+)\n/;

function cacheFile(hash) {
  return path.join(root, 'build', `child-start-${hash}-v8-${process.versions.v8}.cache`);
}

function readCache(file) {
  try {
    return fs.readFileSync(file);
  } catch {
    return undefined;
  }
}

// The bundle's text is `// sources <hash>` and then an object literal:
// { 'lib/x.js': [function (exports, require, module, __filename, __dirname)
// { source }, { request: 'lib/y.js', ... }], ... }, each file's relative
// requests that name another bundled file resolved when it was made.
function compileBundle() {
  const text = fs.readFileSync(BUNDLE, 'utf8');
  const hash = HASH_LINE.exec(text)?.[1] ?? '';
  const file = cacheFile(hash);
  const cachedData = hash === '' ? undefined : readCache(file);
  const script = new vm.Script(`(${text}\n)`, { filename: BUNDLE, cachedData });
  return { sources: script.runInThisContext(), script, cacheFile: file };
}

// Each bundled file's full name, joined once rather than at every require().
const filenames = { __proto__: null };

function filenameOf(file) {
  filenames[file] ??= path.join(root, file);
  return filenames[file];
}

function makeRequire(sources, mod, resolved) {
  function bundleRequire(request) {
    if (!Object.hasOwn(resolved, request)) return mod.require(request);
    const file = resolved[request];
    const cached = require.cache[filenameOf(file)];
    return cached === undefined ? load(sources, file, mod).exports : cached.exports;
  }
  bundleRequire.resolve = (request, options) => Module.createRequire(mod.filename).resolve(request, options);
  bundleRequire.cache = require.cache;
  bundleRequire.main = process.mainModule;
  return bundleRequire;
}

// The node_modules directories a module in dir looks in, nearest first, as
// Node's loader lists them (a directory named node_modules gets none of its
// own): the bundled module's later requires of packages resolve as they
// would from its file in lib/.
function nodeModulePaths(dir) {
  const paths = [];
  for (let at = path.resolve(dir); ; at = path.dirname(at)) {
    if (path.basename(at) !== 'node_modules') paths.push(path.join(at, 'node_modules'));
    if (path.dirname(at) === at) return paths;
  }
}

function load(sources, file, parent) {
  const filename = filenameOf(file);
  const dirname = path.dirname(filename);
  const mod = new Module(filename, parent);
  mod.filename = filename;
  mod.paths = nodeModulePaths(dirname);
  require.cache[filename] = mod;
  const [factory, resolved] = sources[file];
  try {
    factory.call(mod.exports, mod.exports, makeRequire(sources, mod, resolved), mod, filename, dirname);
  } catch (err) {
    delete require.cache[filename];
    throw err;
  }
  mod.loaded = true;
  return mod;
}

// The build's child: once it has answered its first message, everything its
// start compiled is in the script, and the cache is written (whole or not at
// all: under another name, then renamed).
function writeCacheAfterFirstMessage(script, file) {
  process.once('message', () => setImmediate(() => {
    const partial = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(partial, script.createCachedData());
    fs.renameSync(partial, file);
  }));
}

// What this child started from: the cache file for its V8 and whether V8
// took it (null when the bundle did not run).
const started = { cacheFile: null, cacheUsed: false };

function start() {
  // Required for its names by a process that is not a native child (the
  // build script): nothing to start.
  if (process.env.PROCWIRE_NATIVE_CHANNEL_FD === undefined) return;
  const cacheOut = process.env[ENV_CACHE_OUT];
  delete process.env[ENV_CACHE_OUT];
  let compiled;
  try {
    compiled = compileBundle();
  } catch {
    // The parent found the bundle current when it first forked, but it is
    // gone or half written now (a rebuild removes build/ and writes it
    // again): this child starts the ordinary way rather than failing.
    require('./child-preload');
    return;
  }
  const { sources, script, cacheFile: file } = compiled;
  started.cacheFile = file;
  started.cacheUsed = script.cachedDataRejected === false;
  if (require.cache[filenameOf('lib/child-preload.js')] === undefined) {
    load(sources, 'lib/child-preload.js', module);
  }
  if (cacheOut === '1') writeCacheAfterFirstMessage(script, file);
}

start();

module.exports = { BUNDLE, ENV_CACHE_OUT, started };
