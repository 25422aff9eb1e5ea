'use strict';
// Generates the start bundles lib/start-bundle.js runs (see there for when):
//
//   node scripts/build-start-bundle.js           into build/ (npm run build runs it)
//   node scripts/build-start-bundle.js --ship    into prebuilds/start/, with a code cache
//                                                per Node line (npm pack's prepack runs it)
//
// child-start-bundle.js holds the modules a native child loads before its
// first answer, found by forking one without the bundle and asking it, each
// source inside a function that takes CommonJS's arguments (its lines that
// are only comments emptied), with the relative requests it makes of other
// bundled files resolved here by Node's own resolution. The sources
// unchanged, for the check, are in the parent's bundle (below), which holds
// the copies of both: child-start.json records where there each source's
// copy is, and that bundle's hash, so that a parent starts children from the
// bundle only while lib/ is what it was made from. Last, a child started
// from the new bundle writes the V8 code cache for this Node release and CPU
// (child-start-<hash>-<node version>-<cpu>.cache). Run again with another
// Node line, the script keeps a bundle that has not changed and adds that
// line's cache beside the others.
//
// The same is done for the parent (parent-start-bundle.js,
// parent-start.json, parent-start-<hash>-<node version>-<cpu>.cache): the
// modules a fresh process loads through require('procwire') and its first
// fork(), up to that child's answer to the first message it sends, found by
// running one without the bundle.
//
// --ship makes them where the package ships them, running itself under the
// Node lines the prebuilt addons are made for (PROCWIRE_PREBUILD_NODES, as
// scripts/prebuild.sh, which has made those addons and fetched those lines
// into .nodes/): the first traces and writes the bundles, then each adds
// its line's code caches for this CPU (--bundles shipped, --caches shipped).

const childProcess = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const Module = require('module');
const path = require('path');

const ROOT = path.join(__dirname, '..');
const ENTRY = 'lib/child-preload.js';
// What loads the parent's bundle, and lib/index.js, which Node's loader
// loads as the package's main: never run from the bundle.
const PARENT_UNBUNDLED = ['lib/index.js', 'lib/start-bundle.js'];
const RELATIVE_REQUIRE = /\brequire\('(\.[^']*)'\)/g;

// The files under lib/ a native child forked without the bundle has loaded
// when it answers its first message, in the order it loaded them.
function traceStartFiles() {
  return firstAnswer({ PROCWIRE_START_BUNDLE: '0' }, '--trace-child');
}

// The files under lib/ a fresh process has loaded, in order, through
// require('procwire') and its first fork(), up to the child's answer to the
// first message it sends, without the parent's bundle (role --trace-parent), or the cache file that
// process wrote from the bundle (role --cache-parent).
function parentRun(role) {
  const env = { ...process.env };
  if (role === '--trace-parent') env.PROCWIRE_START_BUNDLE = '0';
  const out = childProcess.execFileSync(process.execPath, [__filename, role], { env, encoding: 'utf8', timeout: 60_000 });
  return JSON.parse(out);
}

function traceParentFiles() {
  return parentRun('--trace-parent').filter((file) => !PARENT_UNBUNDLED.includes(file));
}

// The child's answer to its first message, once it has exited (the
// children this script forks leave once disconnected, which this process
// does on the answer, as many a parent does when done with its child).
function firstAnswer(extraEnv, role) {
  const procwire = require(ROOT);
  const env = { ...process.env, ...extraEnv };
  return new Promise((resolve, reject) => {
    const child = procwire.fork(__filename, [role], { env, timeout: 60_000 });
    const exited = (code, signal) => reject(new Error(`the child (${role}) exited (${code ?? signal})`));
    child.once('exit', exited);
    child.once('message', (answer) => {
      child.off('exit', exited);
      child.once('exit', () => resolve(answer));
      if (child.connected) child.disconnect();
    });
    child.send('start');
  });
}

// Each relative require() in a file's source that names another bundled
// file, as Node resolves it from that file.
function resolvedRequests(file, source, files) {
  const resolve = Module.createRequire(path.join(ROOT, file)).resolve;
  const resolved = {};
  for (const [, request] of source.matchAll(RELATIVE_REQUIRE)) {
    let target;
    try {
      target = path.relative(ROOT, resolve(request)).split(path.sep).join('/');
    } catch {
      continue;
    }
    if (files.includes(target)) resolved[request] = target;
  }
  return resolved;
}

// Whether each line of a source begins inside a template literal, a string
// or a block comment (true) or in code (false), from a scan that knows
// JavaScript's literals and comments well enough for lib/: a regular
// expression literal is told from a division by what precedes it. A scan
// that does not end in code has lost its way, and the build stops rather
// than strip what may not be a comment.
function linesInLiterals(source, file) {
  const inside = [false];
  const templates = []; // for each open template literal's `${`, the braces open in it
  let state = 'code';
  let previous = '';
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === '\n') {
      if (state === 'line comment') state = 'code';
      inside.push(state !== 'code');
      continue;
    }
    if (state === 'line comment') continue;
    if (state === 'block comment') {
      if (c === '*' && source[i + 1] === '/') { state = 'code'; i++; }
      continue;
    }
    if (state === "'" || state === '"' || state === 'regexp' || state === 'class') {
      if (c === '\\') i++;
      else if (state === 'regexp' && c === '[') state = 'class';
      else if (state === 'class' && c === ']') state = 'regexp';
      else if (c === (state === 'regexp' ? '/' : state)) { state = 'code'; previous = 'x'; }
      continue;
    }
    if (state === '`') {
      if (c === '\\') i++;
      else if (c === '`') { state = 'code'; previous = 'x'; }
      else if (c === '$' && source[i + 1] === '{') { templates.push(0); state = 'code'; i++; previous = '{'; }
      continue;
    }
    if (c === '/' && source[i + 1] === '/') { state = 'line comment'; continue; }
    if (c === '/' && source[i + 1] === '*') { state = 'block comment'; i++; continue; }
    if (c === "'" || c === '"' || c === '`') { state = c; continue; }
    if (c === '/' && (previous === '' || '(,=:[!&|?{};+-*%<>~^'.includes(previous) || /\b(return|typeof|case|in|of)$/.test(source.slice(Math.max(0, i - 8), i).trimEnd()))) {
      state = 'regexp';
      continue;
    }
    if (templates.length > 0 && c === '{') templates[templates.length - 1]++;
    if (templates.length > 0 && c === '}') {
      if (templates[templates.length - 1] === 0) { templates.pop(); state = '`'; continue; }
      templates[templates.length - 1]--;
    }
    if (!/\s/.test(c)) previous = /[\w$)\]]/.test(c) ? 'x' : c;
  }
  if (state !== 'code' && state !== 'line comment') throw new Error(`${file}: the scan for comments ended inside a ${state}`);
  return inside;
}

// A source as the bundle compiles it: each line that is only a // comment
// emptied, so that the bundle's lines stay where they were (stacks point at
// the same lines) and V8 reads a third less text (a native child's CPU to
// its first answer about 0.4 ms less on Node 20, 1.5 on Node 26).
function withoutCommentLines(source, file) {
  const inside = linesInLiterals(source, file);
  return source.split('\n').map((line, n) => (!inside[n] && /^[ \t]*\/\//.test(line) ? '' : line)).join('\n');
}

// The bundle's bytes and where each source's copy is in them ({ 'lib/x.js':
// [offset, length] }). The bundle is a header line, `// sources <hash>
// <length>`, then what lib/start-bundle.js compiles, <length> bytes from the
// start: the sources without their comment lines, each inside a function,
// in an object literal in parentheses, so that the script's value is the
// object. copies: null for a bundle that holds no copies of its sources
// (the child's), else the files other than its own whose copies it holds
// too (the parent's holds the child's): after the code, never compiled,
// come the sources themselves, byte for byte, which the check in
// lib/start-bundle.js compares with the files.
function makeBundle(files, copies = null) {
  const code = ['({\n'];
  const held = copies === null ? [] : [...files, ...copies];
  const sources = held.map((file) => fs.readFileSync(path.join(ROOT, file)));
  const at = {};
  let copiesLength = 0;
  held.forEach((file, i) => {
    at[file] = [copiesLength, sources[i].length];
    copiesLength += sources[i].length;
  });
  for (const file of files) {
    const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
    code.push(`${JSON.stringify(file)}: [function (exports, require, module, __filename, __dirname) {\n`,
      withoutCommentLines(text, file), `\n}, ${JSON.stringify(resolvedRequests(file, text, files))}],\n`);
  }
  code.push(copies === null ? '})\n' : '})\n// The sources, byte for byte, for the check (never compiled):\n');
  const body = Buffer.concat([Buffer.from(code.join('')), ...sources]);
  const hash = crypto.createHash('sha256').update(body).digest('hex').slice(0, 16);
  const comment = '// Generated by scripts/build-start-bundle.js from the files below, run by\n' +
    '// lib/start-bundle.js; not edited by hand and not committed.\n';
  // The length is written with ten digits, so that it does not change the
  // header's own length.
  const headerLength = `// sources ${hash} ${'0'.repeat(10)}\n${comment}`.length;
  const codeLength = headerLength + Buffer.byteLength(code.join(''));
  const header = Buffer.from(`// sources ${hash} ${String(codeLength).padStart(10, '0')}\n${comment}`);
  for (const place of Object.values(at)) place[0] += codeLength;
  return { bytes: Buffer.concat([header, body]), hash, copies: at };
}

// The bundle's text, as the tests compare it with the one in use (copies:
// as makeBundle() takes it).
function render(files, copies = null) {
  return makeBundle(files, copies).bytes.toString('utf8');
}

// A manifest's text: the bundle's size, then where the copy of each of its
// sources is, and what else its text says (the parent's: the copies it
// holds for the child's bundle; the child's: which bundle holds its
// copies), one file a line.
function manifestText(size, sources, extra) {
  const places = (at) => `{\n${Object.entries(at).map(([file, place]) => ` ${JSON.stringify(file)}: ${JSON.stringify(place)}`).join(',\n')}\n}`;
  const fields = Object.entries(extra).map(([key, value]) => `, ${JSON.stringify(key)}: ${key === 'holdsToo' ? places(value) : JSON.stringify(value)}`);
  return `{"size": ${size}${fields.join('')}, "sources": ${places(sources)}}\n`;
}

// Writes one bundle and its manifest into where (a key of lib/start-bundle.js's
// LOCATIONS) unless they are there already; returns whether they were. A
// new bundle removes the caches of the one before.
function writeBundle(name, where, bytes, text) {
  const { bundleFiles } = require('../lib/start-bundle');
  const { dir, bundle, manifest } = bundleFiles(name, where);
  const sameCode = readOrNull(bundle)?.equals(bytes) === true;
  const sameManifest = readOrNull(manifest)?.toString() === text;
  fs.mkdirSync(dir, { recursive: true });
  // A code cache belongs to the bundle's code: it goes when that changes,
  // not when only the manifest does (the child's names the parent bundle's
  // hash, which changes with any file only the parent's bundle holds), or
  // every Node line's cache but the building one's would be lost for nothing.
  if (!sameCode) {
    for (const f of fs.readdirSync(dir)) {
      if (f.startsWith(`${name}-`) && f.endsWith('.cache')) fs.rmSync(path.join(dir, f));
    }
    fs.writeFileSync(bundle, bytes);
  }
  if (!sameManifest) fs.writeFileSync(manifest, text);
  return sameCode && sameManifest;
}

// Writes both bundles into where; returns, per bundle, whether it was there
// already. The parent's holds the copies of both bundles' sources, so that
// a parent's check reads one bundle, not two (the child's, over 300 KB with
// its copies, cost a parent 0.3 ms of its first fork to read and compare);
// the child's manifest names the parent's bundle by its hash, so that a
// child bundle is current only beside the parent bundle of its own build.
// The child's is written first: a build cut short between the two leaves a
// child's manifest that names a parent bundle not there.
function writeBoth(childFiles, parentFiles, where) {
  const parent = makeBundle(parentFiles, childFiles.filter((f) => !parentFiles.includes(f)));
  const child = makeBundle(childFiles);
  const pick = (files) => Object.fromEntries(files.map((f) => [f, parent.copies[f]]));
  const holdsToo = pick(childFiles.filter((f) => !parentFiles.includes(f)));
  const childText = manifestText(child.bytes.length, pick(childFiles), { copiesIn: { name: 'parent-start', hash: parent.hash } });
  const parentText = manifestText(parent.bytes.length, pick(parentFiles), { holdsToo });
  return { child: writeBundle('child-start', where, child.bytes, childText), parent: writeBundle('parent-start', where, parent.bytes, parentText) };
}

function readOrNull(file) {
  try {
    return fs.readFileSync(file);
  } catch {
    return null;
  }
}

function summary(name, files, where, unchanged) {
  const { bundle } = require('../lib/start-bundle').bundleFiles(name, where);
  return `${path.relative(ROOT, bundle)}: ${files.length} files${unchanged ? ' (unchanged)' : ''}`;
}

// Makes this Node's code caches for the bundles in where, each written by a
// process started from its bundle; returns the cache files. A cache that
// did not land beside its bundle means the process did not use it.
async function makeCaches(where) {
  const { ENV_CACHE_OUT, bundleFiles } = require('../lib/start-bundle');
  const caches = [await firstAnswer({ [ENV_CACHE_OUT]: '1' }, '--cache-child'), parentRun('--cache-parent')];
  const dir = bundleFiles('child-start', where).dir;
  for (const cache of caches) {
    if (cache === null || path.dirname(cache) !== dir) {
      throw new Error(`a process that was to start from the bundles in ${path.relative(ROOT, dir)} did not (its cache: ${cache})`);
    }
  }
  return caches;
}

// The Node binaries of the lines the package's prebuilt addons are made
// for, found where scripts/prebuild.sh found them (.nodes/<major>/, or this
// Node for its own line).
function shippedNodeLines() {
  const lines = (process.env.PROCWIRE_PREBUILD_NODES || '20 22 24 26').split(/\s+/).filter(Boolean);
  const own = process.versions.node.split('.')[0];
  return lines.map((major) => {
    const node = path.join(ROOT, '.nodes', major, 'bin', 'node');
    if (fs.existsSync(node)) return node;
    if (major === own) return process.execPath;
    throw new Error(`no Node ${major} in .nodes/${major} to make its code caches with (scripts/setup-nodes.sh ${major})`);
  });
}

// The shipped bundles: traced and written by the first of the package's
// Node lines, then each line adds its caches, each with the prebuilt addon
// of that line (lib/native.js takes prebuilds/ first), so that every step
// runs natively whatever Node runs this script.
function ship() {
  const env = { ...process.env, PROCWIRE_START_BUNDLE: 'shipped' };
  delete env.PROCWIRE_ADDON;
  delete env.PROCWIRE_FORCE_FALLBACK;
  const nodes = shippedNodeLines();
  const run = (node, args) => process.stdout.write(childProcess.execFileSync(node, [__filename, ...args], { env, encoding: 'utf8', timeout: 120_000 }));
  run(nodes[0], ['--bundles', 'shipped']);
  for (const node of nodes) run(node, ['--caches', 'shipped']);
  // The processes above may have stamped the place (lib/start-bundle.js):
  // a stamp names this machine's inodes and times, which no installed copy
  // has, so it stays out of the package.
  const { dir } = require('../lib/start-bundle').bundleFiles('parent-start', 'shipped');
  fs.rmSync(path.join(dir, require('../lib/start-bundle').STAMP), { force: true });
}

// Traces the start paths and writes both bundles into where.
async function writeBundles(where) {
  // This process, the children it forks and the processes it runs look for
  // bundles in where only (lib/start-bundle.js).
  process.env.PROCWIRE_START_BUNDLE = where;
  const files = await traceStartFiles();
  if (files[0] !== ENTRY) throw new Error(`the tracing child did not start with ${ENTRY}: ${files.join(', ')}`);
  const { PARENT_ENTRY } = require('../lib/start-bundle');
  const parentFiles = traceParentFiles();
  if (parentFiles[0] !== PARENT_ENTRY) {
    throw new Error(`the tracing parent did not load ${PARENT_ENTRY} first: ${parentFiles.join(', ')}`);
  }
  const unchanged = writeBoth(files, parentFiles, where);
  console.log(summary('child-start', files, where, unchanged.child));
  console.log(summary('parent-start', parentFiles, where, unchanged.parent));
}

async function writeCaches(where) {
  process.env.PROCWIRE_START_BUNDLE = where;
  for (const cache of await makeCaches(where)) console.log(`Node ${process.versions.node}: ${path.relative(ROOT, cache)}`);
}

async function main(argv) {
  const { LOCATIONS } = require('../lib/start-bundle');
  if (argv.length > 1 && !Object.hasOwn(LOCATIONS, argv[1])) throw new Error(`${argv[1]}: not one of ${Object.keys(LOCATIONS).join(', ')}`);
  if (argv[0] === '--ship') return ship();
  if (argv[0] === '--bundles') return writeBundles(argv[1]);
  if (argv[0] === '--caches') return writeCaches(argv[1]);
  await writeBundles('build');
  // The caches come from a fresh process: this one looked for the bundles
  // (at its first fork, tracing) before they were written, and keeps what
  // it found then, so the children it forks would not start from them.
  const env = { ...process.env, PROCWIRE_START_BUNDLE: 'build' };
  process.stdout.write(childProcess.execFileSync(process.execPath, [__filename, '--caches', 'build'], { env, encoding: 'utf8', timeout: 120_000 }));
}

// A fresh process's first fork, for traceParentFiles() and the parent's
// cache: a first round trip (this process sends, the child answers), as a
// parent's first use of a child mostly is, so that the cache holds the send
// path too: without it, a parent's first send() compiled itself and what it
// calls from source, 0.3 ms of CPU on Node 20 and 0.4 on Node 26 (medians of
// 21 interleaved runs); prints what the role asks for once the child's
// answer has come.
function firstForkRun(role) {
  const lib = path.join(ROOT, 'lib') + path.sep;
  const procwire = require(ROOT);
  const child = procwire.fork(__filename, ['--first-message-child']);
  child.send('start');
  if (role === '--trace-parent') {
    child.once('message', () => {
      const answer = Object.keys(require.cache).filter((f) => f.startsWith(lib)).map((f) => path.relative(ROOT, f).split(path.sep).join('/'));
      process.stdout.write(JSON.stringify(answer));
      child.kill();
    });
    return;
  }
  // The cache is written once the child has gone, after this process
  // disconnected it: so it holds the close path and the child's exit too,
  // which most first forks end with, and which would otherwise be compiled
  // from source at the end of every such process's run.
  child.once('message', () => child.disconnect());
  child.once('exit', () => setImmediate(() => process.stdout.write(JSON.stringify(require('../lib/start-bundle').writeParentCache()))));
}

if (process.argv[2] === '--trace-child') {
  process.once('message', () => {
    const lib = path.join(ROOT, 'lib') + path.sep;
    process.send(Object.keys(require.cache).filter((f) => f.startsWith(lib))
      .map((f) => path.relative(ROOT, f).split(path.sep).join('/')), () => process.disconnect());
  });
} else if (process.argv[2] === '--cache-child') {
  // The parent disconnects this child once it has this first answer;
  // lib/start-bundle.js writes the cache then, and the child leaves.
  process.once('message', () => {
    const startBundle = require.cache[path.join(ROOT, 'lib', 'start-bundle.js')];
    process.send(startBundle === undefined ? null : startBundle.exports.childStarted.cacheFile);
  });
} else if (process.argv[2] === '--trace-parent' || process.argv[2] === '--cache-parent') {
  firstForkRun(process.argv[2]);
} else if (process.argv[2] === '--first-message-child') {
  process.once('message', () => process.send('started', () => process.disconnect()));
} else if (require.main === module) {
  main(process.argv.slice(2)).catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}

module.exports = { ENTRY, traceStartFiles, traceParentFiles, render, withoutCommentLines };
