'use strict';
// Start bundles: one generated file that holds, each inside a function, the
// modules a process loads on its way to something that must be quick, so
// that Node's loader does not find, stat, resolve, read and compile each of
// about 35 files (see docs/benchmarks.md, "Start-up"). There are two, made
// by scripts/build-start-bundle.js (run by `npm run build`), never
// committed, so the tree keeps one copy of the source:
//   - the child's (build/child-start-bundle.js): what a native child loads
//     before its first answer. lib/fork.js makes such a child preload this
//     file, which then runs it (startChild(), at the end), when it is
//     current (childPreload()), and lib/child-preload.js otherwise: this
//     file is the only one the child loads the ordinary way;
//   - the parent's (build/parent-start-bundle.js): what require('procwire')
//     and a process's first fork() load, up to that child's first message.
//     lib/index.js and the hook's first fork (lib/register.js) load
//     lib/fork.js through parentRequire(), from the bundle when it is
//     current.
// A bundle is current when lib/ is what it was made from (the sizes and
// modification times in build/<name>.json, checked once per process); a
// checkout without it, or with lib/ changed since, loads the ordinary way.
// PROCWIRE_START_BUNDLE=0 in a process's environment (the child's, for the
// child's bundle) does that too, so that errors name the files in lib/
// rather than the bundle.
//
// Each bundled module is made as Node's loader makes it and goes into
// require.cache under its own file name, so a later require() of the same
// file gets the same module, and a module already loaded is used as it is;
// builtins, the addon and files a bundle lacks go through the real
// require(). A bundle is compiled with the V8 code cache the build made for
// this V8 when there is one: it holds the functions compiled on the way the
// bundle was made for, so they are not compiled again. V8 refuses a cache
// from another V8 or other flags, and the bundle is then compiled from
// source. The cache's name carries the bundle's hash, so a cache is only
// ever used with the bundle it was made from.

const fs = require('fs');
const path = require('path');
const Module = require('module');
const vm = require('vm');

const root = path.join(__dirname, '..');
const HASH_LINE = /^\/\/ sources ([0-9a-f]+)\n/;

// name: 'child-start' or 'parent-start'.
function bundleFiles(name) {
  return { bundle: path.join(root, 'build', `${name}-bundle.js`), manifest: path.join(root, 'build', `${name}.json`) };
}
const { bundle: BUNDLE, manifest: MANIFEST } = bundleFiles('child-start');

// The size and modification time the manifest records for each source, so
// that checking the bundle costs a stat per file, once per process.
function fileStamp(file) {
  const stat = fs.statSync(file, { throwIfNoEntry: false });
  return stat === undefined ? null : [stat.size, stat.mtimeMs];
}

function sameStamp(a, b) {
  return a !== null && Array.isArray(b) && a[0] === b[0] && a[1] === b[1];
}

// The sources' stamps, taken once per process: the parent's check and the
// child's (at the first fork) share most of their files.
const sourceStamps = new Map();

function sourceStamp(file) {
  if (!sourceStamps.has(file)) sourceStamps.set(file, fileStamp(path.join(root, file)));
  return sourceStamps.get(file);
}

// The bundle's file when it was made from lib/ as it is now, else null.
function currentBundle(name = 'child-start') {
  const files = bundleFiles(name);
  let manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(files.manifest, 'utf8'));
  } catch {
    return null;
  }
  if (!sameStamp(fileStamp(files.bundle), manifest.bundle)) return null;
  for (const [file, stamp] of Object.entries(manifest.sources ?? {})) {
    if (!sameStamp(sourceStamp(file), stamp)) return null;
  }
  return files.bundle;
}

function bundlesAllowed(env) {
  return env.PROCWIRE_START_BUNDLE !== '0';
}

let childBundle;

// env: the child's environment (PROCWIRE_START_BUNDLE there decides).
function childPreload(env) {
  if (bundlesAllowed(env)) {
    if (childBundle === undefined) childBundle = currentBundle('child-start');
    if (childBundle !== null) return __filename;
  }
  return require.resolve('./child-preload');
}

function cacheFile(name, hash) {
  return path.join(root, 'build', `${name}-${hash}-v8-${process.versions.v8}.cache`);
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
// Returns its sources, the compiled script (whose code cache the build
// writes), the cache file for this V8 and whether V8 took it.
function compileBundle(name) {
  const { bundle } = bundleFiles(name);
  const text = fs.readFileSync(bundle, 'utf8');
  const hash = HASH_LINE.exec(text)?.[1] ?? '';
  const file = cacheFile(name, hash);
  const cachedData = hash === '' ? undefined : readCache(file);
  const script = new vm.Script(`(${text}\n)`, { filename: bundle, cachedData });
  return { sources: script.runInThisContext(), script, cacheFile: file, cacheUsed: script.cachedDataRejected === false };
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
    return loadModule(sources, resolved[request], mod).exports;
  }
  bundleRequire.resolve = (request, options) => Module.createRequire(mod.filename).resolve(request, options);
  bundleRequire.cache = require.cache;
  bundleRequire.main = process.mainModule;
  return bundleRequire;
}

// The node_modules directories a module in dir looks in, nearest first, as
// Node's loader lists them (a directory named node_modules gets none of its
// own): the bundled module's later requires of packages resolve as they
// would from its file in lib/. Listed once per directory: the bundled files
// share a few.
const pathsByDir = new Map();

function nodeModulePaths(dir) {
  let paths = pathsByDir.get(dir);
  if (paths !== undefined) return paths.slice();
  paths = [];
  for (let at = path.resolve(dir); ; at = path.dirname(at)) {
    if (path.basename(at) !== 'node_modules') paths.push(path.join(at, 'node_modules'));
    if (path.dirname(at) === at) break;
  }
  pathsByDir.set(dir, paths);
  return paths.slice();
}

// Runs one bundled file ('lib/x.js') as a module whose parent is parent,
// and returns the module; one already in require.cache is returned as it is.
function loadModule(sources, file, parent) {
  const filename = filenameOf(file);
  const cached = require.cache[filename];
  if (cached !== undefined) return cached;
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

// Writes a compiled bundle's code cache with what this process has compiled
// so far (whole or not at all: under another name, then renamed).
function writeCache(bundle) {
  const partial = `${bundle.cacheFile}.${process.pid}.tmp`;
  fs.writeFileSync(partial, bundle.script.createCachedData());
  fs.renameSync(partial, bundle.cacheFile);
}

// The parent's compiled bundle, null when this process does not use one.
let parentBundle;

function compiledParentBundle() {
  if (parentBundle === undefined) {
    parentBundle = null;
    // A native child started from its own bundle has loaded most of what
    // the parent's holds; compiling that for the few files left (lib/fork.js,
    // for its require('procwire')) would cost it more than loading them.
    const childFromBundle = childStarted.cacheFile !== null;
    if (!childFromBundle && bundlesAllowed(process.env) && currentBundle('parent-start') !== null) {
      try {
        parentBundle = compileBundle('parent-start');
      } catch {
        // A bundle that cannot be read or compiled is not worth failing
        // for: the files it holds load the ordinary way.
        parentBundle = null;
      }
    }
  }
  return parentBundle;
}

// The file the parent's bundle is traced from: it must be the first the
// trace loads after lib/index.js (scripts/build-start-bundle.js checks).
const PARENT_ENTRY = 'lib/fork.js';

// The exports of file ('lib/x.js'), and with it what it loads at once and
// later (lib/fork.js loads lib/child-process/ at the first fork()), from the
// parent's bundle when this process uses one and the bundle holds it.
function parentRequire(file) {
  const bundle = compiledParentBundle();
  if (bundle === null || !Object.hasOwn(bundle.sources, file)) return require(path.join(root, file));
  return loadModule(bundle.sources, file, module).exports;
}

// For scripts/build-start-bundle.js's process, after its first fork: writes
// the parent's code cache. Returns the cache file, or null when this process
// did not use the bundle.
function writeParentCache() {
  const bundle = compiledParentBundle();
  if (bundle === null) return null;
  writeCache(bundle);
  return bundle.cacheFile;
}

// Set only by scripts/build-start-bundle.js, in the child it forks to make
// the child's cache.
const ENV_CACHE_OUT = 'PROCWIRE_START_CACHE_OUT';

// What a native child started from: the cache file for its V8 and whether V8
// took it (null when the child's bundle did not run).
const childStarted = { cacheFile: null, cacheUsed: false };

// A native child preloading this file: runs lib/child-preload.js and what it
// loads from the child's bundle. The build's child writes the cache once it
// has answered its first message, when everything its start compiled is in
// the script. In any other process (the parent that requires this file, or a
// native child that lib/child-preload.js started, which has removed
// PROCWIRE_NATIVE_CHANNEL_FD before anything else runs) there is nothing to
// start.
function startChild() {
  if (process.env.PROCWIRE_NATIVE_CHANNEL_FD === undefined) return;
  const cacheOut = process.env[ENV_CACHE_OUT];
  delete process.env[ENV_CACHE_OUT];
  let bundle;
  try {
    bundle = compileBundle('child-start');
  } catch {
    // The parent found the bundle current when it first forked, but it is
    // gone or half written now (a rebuild removes build/ and writes it
    // again): this child starts the ordinary way rather than failing.
    require('./child-preload');
    return;
  }
  childStarted.cacheFile = bundle.cacheFile;
  childStarted.cacheUsed = bundle.cacheUsed;
  loadModule(bundle.sources, 'lib/child-preload.js', module);
  if (cacheOut === '1') process.once('message', () => setImmediate(() => writeCache(bundle)));
}

// Whether this process loads from the parent's bundle: null when not, else
// its code cache file for this V8 and whether V8 took it.
function parentBundleState() {
  const bundle = compiledParentBundle();
  return bundle === null ? null : { cacheFile: bundle.cacheFile, cacheUsed: bundle.cacheUsed };
}

module.exports = {
  BUNDLE, MANIFEST, ENV_CACHE_OUT, PARENT_ENTRY, childStarted, bundleFiles, fileStamp, currentBundle, childPreload,
  compileBundle, loadModule, writeCache, parentRequire, parentBundleState, writeParentCache,
};

startChild();
