'use strict';
// Start bundles: one generated file that holds, each inside a function, the
// modules a process loads on its way to something that must be quick, so
// that Node's loader does not find, stat, resolve, read and compile each of
// about 35 files (see docs/benchmarks.md, "Start-up"). There are two, made
// by scripts/build-start-bundle.js, never committed, so the tree keeps one
// copy of the source:
//   - the child's (child-start-bundle.js): what a native child loads before
//     its first answer. lib/fork.js makes such a child preload this file,
//     which then runs it (startChild(), at the end), when it is current
//     (childPreload()), and lib/child-preload.js otherwise: this file is the
//     only one the child loads the ordinary way;
//   - the parent's (parent-start-bundle.js): what require('procwire') and a
//     process's first fork() load, up to that child's first message.
//     lib/index.js and the hook's first fork (lib/register.js) load
//     lib/fork.js through parentRequire(), from the bundle when it is
//     current.
// They are in one of two places, looked for in this order (LOCATIONS):
// prebuilds/start/, which `npm pack` makes (its prepack script) and the
// package ships, and build/, which `npm run build` makes in a checkout.
// A bundle is current when every file it holds is, byte for byte, its copy
// (at the place its manifest, <name>.json beside it, records: in the
// parent's bundle, which holds the copies of both, so that a parent reads
// one bundle to check them), checked once per process; a bundle that is not current is not used, and
// the files load the ordinary way. So a package whose lib/ was patched after
// it was installed (patch-package) never runs the bundle's older copy.
// PROCWIRE_START_BUNDLE=0 in a process's environment (the child's, for the
// child's bundle) does that too, so that errors name the files in lib/
// rather than the bundle.
//
// Each bundled module is made as Node's loader makes it and goes into
// require.cache under its own file name, so a later require() of the same
// file gets the same module, and a module already loaded is used as it is;
// builtins, the addon and files a bundle lacks go through the real
// require(). A bundle is compiled with the V8 code cache made by this Node
// release on this CPU beside it when there is one: it holds the functions
// compiled on the way the bundle was made for, so they are not compiled
// again. V8 refuses a cache made by another V8 or with other flags, and the
// bundle is then compiled from source. The cache's name carries the
// bundle's hash, so a cache is only ever used with the bundle it was made
// from.

const fs = require('fs');
const vm = require('vm');
// Node's Module class, which made this module: the one require('module')
// returns. A process's first require() of a builtin makes that builtin's
// ES module facade, which for 'module' cost a native child 0.1-0.2 ms of its
// start; where this file was loaded by another loader (a test runner's own
// module registry), its module object is not a Module, and require() is used.
const ownLoader = typeof module.constructor.createRequire === 'function';
const Module = ownLoader ? module.constructor : require('module');

// The package's directory. Paths here are joined by hand rather than with
// path.join() and path.dirname(): the package runs on Linux only (its
// package.json), its paths are absolute and normal, and a native child on
// Node 26 spent 1-2.6 ms of its start in those calls (CPU profiles).
const root = __dirname.slice(0, __dirname.lastIndexOf('/'));
const HEADER = /^\/\/ sources ([0-9a-f]+) ([0-9]{10})\n/;

// Where bundles are, in the order they are looked for: what the package
// ships first (in a checkout it exists only while `npm pack` runs, and is
// then the newest), then a checkout's own build.
const LOCATIONS = { shipped: `${root}/prebuilds/start`, build: `${root}/build` };

// name: 'child-start' or 'parent-start'; where: a key of LOCATIONS.
function bundleFiles(name, where = 'build') {
  const dir = LOCATIONS[where];
  return { dir, bundle: `${dir}/${name}-bundle.js`, manifest: `${dir}/${name}.json` };
}
const { bundle: BUNDLE, manifest: MANIFEST } = bundleFiles('child-start');

// A bundled file as it is now ('lib/x.js'), null when it cannot be read.
function sourceBytes(file) {
  try {
    return fs.readFileSync(`${root}/${file}`);
  } catch {
    return null;
  }
}

const NAMES = ['child-start', 'parent-start'];

// A bundle's manifest, read: { size: the bundle's, sources: { 'lib/x.js':
// [offset, length] of its copy, ... }, and, for the child's, copiesIn: {
// name, hash }, the bundle that holds its sources' copies (the parent's,
// named by its header's hash, so that it is the one of the same build) },
// with the bundle's bytes when it holds its own copies; null when either is
// missing or they do not fit. A bundle whose copies are in another is only
// stat()ed: a parent need not read the child's bundle to check it.
function readBundle(files) {
  try {
    const manifest = JSON.parse(fs.readFileSync(files.manifest, 'utf8'));
    const sources = Object.entries(manifest.sources ?? {});
    const wellFormed = ([, place]) => Array.isArray(place) && place.length === 2 &&
      place.every((n) => Number.isSafeInteger(n) && n >= 0);
    if (sources.length === 0 || !sources.every(wellFormed)) return null;
    const { copiesIn } = manifest;
    if (copiesIn !== undefined) {
      if (!NAMES.includes(copiesIn?.name) || typeof copiesIn.hash !== 'string') return null;
      const size = fs.statSync(files.bundle, { throwIfNoEntry: false })?.size;
      return size === manifest.size ? { bytes: undefined, sources, copiesIn } : null;
    }
    const bytes = fs.readFileSync(files.bundle);
    return bytes.length === manifest.size ? { bytes, sources, copiesIn } : null;
  } catch {
    return null;
  }
}

// The bytes that hold a read bundle's copies: its own, or those of the
// bundle its manifest names when that one is of the same build (its hash);
// null otherwise.
function copiesOf(bundle, read) {
  if (bundle.copiesIn === undefined) return bundle.bytes;
  const holder = read[bundle.copiesIn.name];
  if (holder === null || holder.bytes === undefined) return null;
  const header = HEADER.exec(holder.bytes.toString('latin1', 0, 64));
  return header !== null && header[1] === bundle.copiesIn.hash ? holder.bytes : null;
}

// Whether every file of entries ([['lib/x.js', [offset, length]], ...]) is
// now, byte for byte, its copy in bytes. sources: the files read so far, by
// name (null for one that cannot be read), shared by both bundles' checks.
// seen: each file's stat() (statKey()), taken before it is read, for the
// stamp.
function sameAsFiles(entries, bytes, sources, seen) {
  for (const [file, [offset, length]] of entries) {
    if (!sources.has(file)) {
      seen.set(file, statKey(file));
      sources.set(file, sourceBytes(file));
    }
    const source = sources.get(file);
    if (source === null || source.length !== length || offset + length > bytes.length ||
      source.compare(bytes, offset, offset + length) !== 0) return false;
  }
  return true;
}

// Which bundles of each place are current, once per process.
const checkedPlaces = new Map();

// The stamp: what stat() said of every file a place's check read (the
// bundled files, the bundles, their manifests) when the check last found
// both bundles current, so that a later process stat()s those files and
// reads none of them (as git's index and make do). A check read the 38
// files and compared them with their copies, 2-2.5 ms of a process's first
// fork; stat()ing them costs a fraction of that. A file is the same when
// its size, modification and change times, inode and device all are: an
// edit, even one that keeps the size and puts the modification time back
// (touch -d, npm's fixed time), sets the change time, which no one can set.
// A file changed within STAMP_AGE_MS of the check that read it could be
// changed again within the same tick of a coarse clock (or of a file system
// that keeps seconds) and keep every field: no stamp is written then, and
// each process checks the contents until the files are older (git's "racy
// clean" entries). The stamp is written whole or not at all, and where it
// cannot be (a read-only package) every process checks the contents, as
// before. It is in the place's directory (never in the package: see
// scripts/build-start-bundle.js).
const STAMP = 'start-stamp.json';
const STAMP_AGE_MS = 2000;

// What stat() says of a file relative to root ('lib/x.js', 'build/x.json'):
// [size, mtimeMs, ctimeMs, ino, dev], null when it is not there.
function statKey(file) {
  const st = fs.statSync(`${root}/${file}`, { throwIfNoEntry: false });
  return st === undefined ? null : [st.size, st.mtimeMs, st.ctimeMs, st.ino, st.dev];
}

function sameKey(a, b) {
  return a !== null && Array.isArray(b) && a.length === b.length && a.every((v, i) => v === b[i]);
}

// Both bundles of where, current by their stamp: true when every file the
// stamp names is as it says, false otherwise (no stamp, another's, a
// file changed or gone).
function stamped(where) {
  let stamp;
  try {
    stamp = JSON.parse(fs.readFileSync(`${LOCATIONS[where]}/${STAMP}`, 'utf8'));
  } catch {
    return false;
  }
  const files = stamp?.files;
  if (files === null || typeof files !== 'object' || Object.keys(files).length === 0) return false;
  for (const file in files) if (!sameKey(statKey(file), files[file])) return false;
  return true;
}

// Writes where's stamp from seen (file: statKey()), the check having found
// both bundles current; not when a file is too young (above) or missing.
function writeStamp(where, seen, checkedAt) {
  const files = {};
  for (const [file, key] of seen) {
    if (key === null || !(key[1] < checkedAt - STAMP_AGE_MS && key[2] < checkedAt - STAMP_AGE_MS)) return;
    files[file] = key;
  }
  const stamp = `${LOCATIONS[where]}/${STAMP}`;
  const partial = `${stamp}.${process.pid}.tmp`;
  try {
    fs.writeFileSync(partial, JSON.stringify({ files }));
    fs.renameSync(partial, stamp);
  } catch {
    // A read-only place, one that went away, or a process the permission
    // model lets only read (which refuses the removal too): its processes
    // check the contents every time.
    try {
      fs.rmSync(partial, { force: true });
    } catch {
      // Nothing was written.
    }
  }
}

// The bundles' own files and manifests of where, relative to root, stat()ed
// into seen before they are read.
function statBundles(where, seen) {
  const dir = LOCATIONS[where].slice(root.length + 1);
  for (const name of NAMES) {
    seen.set(`${dir}/${name}-bundle.js`, statKey(`${dir}/${name}-bundle.js`));
    seen.set(`${dir}/${name}.json`, statKey(`${dir}/${name}.json`));
  }
}

// Checks both bundles in where; returns, per name, null when the bundle is
// not current, else { bytes: the bundle's, when the check read them }. A
// bundle is current when every file its manifest names is, byte for byte,
// its copy (in the parent's bundle, which holds the copies of both), or
// when the place's stamp says that none of the files has changed since a
// check found that.
//
// Why contents, rather than the sizes and modification times compared
// before the package shipped bundles: npm sets every file it unpacks to one
// fixed time, and other installers to the time they wrote it, so times
// taken when the bundle was made say nothing in an installed copy, and a
// size alone misses an edit that keeps it (a patched constant). Reading the
// files costs little more than stat()ing them (in a fresh process, the 38
// files: stat 0.6 ms, read 0.8-1.3 ms, a SHA-256 of them 4-9 ms, most of it
// loading crypto), and the bundle already holds each file's text to compare
// with. Both bundles of a place are checked at once, each file read once:
// they share most of their files, and checking the child's at the first
// fork instead would read them again (0.9 ms) or keep them until then. The
// whole check took 2.4 ms where the sizes and times took 1.1 (Node 20,
// medians of 21 fresh processes), 0.3 of it reading the parent's bundle,
// which compiling it reads anyway; reading the child's bundle too, when it
// held its own copies, was 0.3 ms more.
function checkPlace(where) {
  // A place that is not there (build/ in an installed copy, prebuilds/start/
  // in a checkout) costs one access(), not a thrown error per manifest.
  const there = fs.existsSync(LOCATIONS[where]);
  const found = { 'child-start': null, 'parent-start': null };
  if (there && stamped(where)) {
    found['child-start'] = found['parent-start'] = { bytes: undefined };
  } else if (there) {
    const checkedAt = Date.now();
    const seen = new Map();
    statBundles(where, seen);
    const read = {};
    for (const name of NAMES) read[name] = readBundle(bundleFiles(name, where));
    const sources = new Map();
    for (const name of NAMES) {
      const bundle = read[name];
      const copies = bundle === null ? null : copiesOf(bundle, read);
      found[name] = copies !== null && sameAsFiles(bundle.sources, copies, sources, seen) ? { bytes: bundle.bytes } : null;
    }
    if (NAMES.every((name) => found[name] !== null)) writeStamp(where, seen, checkedAt);
  }
  checkedPlaces.set(where, { 'child-start': found['child-start'] !== null, 'parent-start': found['parent-start'] !== null });
  return found;
}

// The places env lets a process look for bundles in: none with
// PROCWIRE_START_BUNDLE=0, only that one when it names one of LOCATIONS
// (scripts/build-start-bundle.js does, so that the code caches it makes are
// made from the bundles it has just written), else all of them.
function placesFor(env) {
  const only = env.PROCWIRE_START_BUNDLE;
  if (only === '0') return [];
  return Object.hasOwn(LOCATIONS, only) ? [only] : Object.keys(LOCATIONS);
}

// Where the current bundle of that name is, and its bytes when this call
// read them (the place's first check), else null.
function findBundle(name, env = process.env) {
  for (const where of placesFor(env)) {
    if (checkedPlaces.has(where)) {
      if (checkedPlaces.get(where)[name]) return { where, bytes: null };
      continue;
    }
    const found = checkPlace(where)[name];
    if (found !== null) return { where, bytes: found.bytes ?? null };
  }
  return null;
}

// The current bundle's file, else null.
function currentBundle(name = 'child-start', env = process.env) {
  const found = findBundle(name, env);
  return found === null ? null : bundleFiles(name, found.where).bundle;
}

// Set by a parent in the environment of a native child it starts from a
// bundle: which of LOCATIONS the parent found current, so that the child
// runs that one without checking again. The child removes it.
const ENV_FROM = 'PROCWIRE_START_BUNDLE_FROM';

// env: the child's environment (PROCWIRE_START_BUNDLE there decides).
function childPreload(env) {
  const found = findBundle('child-start', env);
  if (found !== null) {
    env[ENV_FROM] = found.where;
    return __filename;
  }
  delete env[ENV_FROM];
  return require.resolve('./child-preload');
}

// The code cache of the bundle with that hash in dir, for this Node release
// and CPU. V8's own check of a cache is not enough to go by: Node 20.20.2 on
// arm64 (under qemu) took the x64 cache that release made, V8's version and
// flags being the same, and crashed. So a cache is only read by the release
// (and so the V8 build) and CPU that made it; any other finds none and
// reads nothing.
function cacheFile(dir, name, hash) {
  return `${dir}/${name}-${hash}-${process.version}-${process.arch}.cache`;
}

function readCache(file) {
  try {
    return fs.readFileSync(file);
  } catch {
    return undefined;
  }
}

// A bundle begins with `// sources <hash> <length>`; its first <length>
// bytes are what is compiled: an object literal in parentheses, ({
// 'lib/x.js': [function (exports, require, module, __filename, __dirname) {
// source }, { request: 'lib/y.js', ... }], ... }), each source with its
// lines that are only comments emptied (its other lines where they are in
// the file), and each file's relative requests that name another bundled
// file resolved when it was made. The sources themselves follow, byte for
// byte, for the check above, and are neither decoded nor compiled here. Returns the sources, the
// compiled script (whose code cache the build writes), the cache file for
// this process and whether V8 took it. bytes: the bundle's, when the caller
// has read them already.
function compileBundle(name, where = 'build', bytes = undefined) {
  const { dir, bundle } = bundleFiles(name, where);
  bytes ??= fs.readFileSync(bundle);
  const header = HEADER.exec(bytes.toString('latin1', 0, 64));
  if (header === null) throw new Error(`${bundle} is not a start bundle`);
  const file = cacheFile(dir, name, header[1]);
  // The text is compiled as it is read: the parentheses are the bundle's
  // own, because wrapping it here would make V8 copy the whole text (over
  // 128 KB) once more to flatten the concatenation.
  const script = new vm.Script(bytes.toString('utf8', 0, Number(header[2])), { filename: bundle, cachedData: readCache(file) });
  return { sources: script.runInThisContext(), script, cacheFile: file, cacheUsed: script.cachedDataRejected === false };
}

// Each bundled file's full name, joined once rather than at every require().
const filenames = { __proto__: null };

function filenameOf(file) {
  filenames[file] ??= `${root}/${file}`;
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
  // dir is absolute and normal, so the directories above it are its
  // prefixes that end before a '/'.
  for (let end = dir.length; end > 0; end = dir.lastIndexOf('/', end - 1)) {
    const at = dir.slice(0, end);
    if (!at.endsWith('/node_modules')) paths.push(`${at}/node_modules`);
  }
  paths.push('/node_modules');
  pathsByDir.set(dir, paths);
  return paths.slice();
}

// Runs one bundled file ('lib/x.js') as a module whose parent is parent,
// and returns the module; one already in require.cache is returned as it is.
function loadModule(sources, file, parent) {
  const filename = filenameOf(file);
  const cached = require.cache[filename];
  if (cached !== undefined) return cached;
  const dirname = filename.slice(0, filename.lastIndexOf('/'));
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
    // Under another loader (jest's module registry), which runs each test
    // file's modules in a context of its own, the bundle's code would run in
    // Node's main context instead (vm.Script.runInThisContext), so procwire's
    // errors and objects would not be the test's Error and Object: its
    // files load through that loader, as any package's do.
    const found = childFromBundle || !ownLoader ? null : findBundle('parent-start');
    if (found !== null) {
      try {
        parentBundle = compileBundle('parent-start', found.where, found.bytes ?? undefined);
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
  if (bundle === null || !Object.hasOwn(bundle.sources, file)) return require(`${root}/${file}`);
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
// has answered its first message and its parent has disconnected it, when
// everything its start compiled is in the script, and its close path too
// (compiled from source at the end of every child's run otherwise: about
// 0.2 ms between the parent's disconnect() and the child's 'disconnect'). In any other process (the parent that requires this file, or a
// native child that lib/child-preload.js started, which has removed
// PROCWIRE_NATIVE_CHANNEL_FD before anything else runs) there is nothing to
// start.
function startChild() {
  if (process.env.PROCWIRE_NATIVE_CHANNEL_FD === undefined) return;
  const cacheOut = process.env[ENV_CACHE_OUT];
  const where = process.env[ENV_FROM];
  delete process.env[ENV_CACHE_OUT];
  delete process.env[ENV_FROM];
  let bundle;
  try {
    if (!Object.hasOwn(LOCATIONS, where)) throw new Error(`${ENV_FROM} names no place for bundles`);
    bundle = compileBundle('child-start', where);
  } catch {
    // The parent found the bundle current when it first forked, but it is
    // gone or half written now (a rebuild removes build/ and writes it
    // again), or the parent did not say where it is: this child starts the
    // ordinary way rather than failing.
    require('./child-preload');
    return;
  }
  childStarted.cacheFile = bundle.cacheFile;
  childStarted.cacheUsed = bundle.cacheUsed;
  loadModule(bundle.sources, 'lib/child-preload.js', module);
  if (cacheOut === '1') process.once('disconnect', () => setImmediate(() => writeCache(bundle)));
}

// Whether this process loads from the parent's bundle: null when not, else
// its code cache file for this process and whether V8 took it.
function parentBundleState() {
  const bundle = compiledParentBundle();
  return bundle === null ? null : { cacheFile: bundle.cacheFile, cacheUsed: bundle.cacheUsed };
}

module.exports = {
  BUNDLE, MANIFEST, LOCATIONS, STAMP, ENV_CACHE_OUT, PARENT_ENTRY, childStarted, bundleFiles, currentBundle, findBundle,
  childPreload, compileBundle, loadModule, writeCache, parentRequire, parentBundleState, writeParentCache,
};

startChild();
