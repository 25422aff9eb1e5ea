'use strict';
// The code's layout keeps its promises: the stats layout and the codec ids
// are defined once per language and agree, every backend keeps the contract,
// and lib/ has no import cycle.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const { STATS } = require('../lib/stats');
const { FORMATS } = require('../lib/codec/formats');
const native = require('../lib/native');
const { SCHEMES, backendFor } = require('../lib/transport');
const { checkHandle, capabilities } = require('../lib/transport/contract');

const root = path.join(__dirname, '..');

test('the stats layout of src/core/channel_stats.h and lib/stats.js agree', () => {
  const header = fs.readFileSync(path.join(root, 'src/core/channel_stats.h'), 'utf8');
  const fields = [...header.matchAll(/\{"(\w+)", k\w+\}/g)].map((m) => m[1]);
  const js = Object.keys(STATS).filter((k) => k !== 'length' && k !== 'histogramBuckets');
  assert.deepStrictEqual(fields, js);
  if (native.native) assert.deepStrictEqual({ ...native.binding.statsLayout }, { ...STATS });
});

test('codec ids match WireFormat in src/core/frame_reader.h', () => {
  const header = fs.readFileSync(path.join(root, 'src/core/frame_reader.h'), 'utf8');
  const m = header.match(/enum class WireFormat : uint8_t \{ kAdvanced = (\d+), kJson = (\d+) \}/);
  assert.ok(m, 'WireFormat is defined');
  assert.strictEqual(FORMATS.advanced.id, Number(m[1]));
  assert.strictEqual(FORMATS.json.id, Number(m[2]));
});

test('addresses choose their backend in lib/transport/index.js', () => {
  assert.deepStrictEqual(SCHEMES.map((s) => s.name), ['nats', 'tls', 'socket']);
  assert.strictEqual(backendFor('nats://127.0.0.1:4222', {}), require('../lib/transport/nats'));
  assert.strictEqual(backendFor({ port: 1 }, { tls: {} }), require('../lib/transport/tls'));
  assert.strictEqual(backendFor({ port: 1 }, {}), require('../lib/transport/socket'));
  assert.strictEqual(backendFor('name', undefined), require('../lib/transport/socket'));
  assert.strictEqual(backendFor({ path: '/x.sock' }, { tls: {} }), require('../lib/transport/socket'));
});

test('checkHandle() refuses a handle that breaks the contract, with a coded error', () => {
  const ok = {};
  for (const m of ['write', 'writeBuffer', 'flush', 'readStart', 'readStop', 'ref', 'unref', 'close', 'stats']) {
    ok[m] = () => 0;
  }
  assert.strictEqual(checkHandle(ok, 'test').requests, false);
  const { close, ...noClose } = ok;
  assert.strictEqual(typeof close, 'function');
  assert.throws(() => checkHandle(noClose, 'test'), { code: 'ERR_PROCWIRE_INVALID_ARG', message: /close\(\)/ });
  assert.throws(() => checkHandle(null, 'test'), { code: 'ERR_PROCWIRE_INVALID_ARG' });
  assert.throws(() => checkHandle({ ...ok, capabilities: capabilities({ requests: true }) }, 'test'),
    { code: 'ERR_PROCWIRE_INVALID_ARG', message: /writeRequest/ });
  assert.throws(() => capabilities({ teleport: true }), TypeError);
});

test('end reasons are defined once in src/core/end_reason.h and named the same in lib/', () => {
  const { END_REASONS } = require('../lib/transport/contract');
  const header = fs.readFileSync(path.join(root, 'src/core/end_reason.h'), 'utf8');
  const names = [...header.match(/kEndReasonNames\[\] = \{([^}]*)\}/)[1].matchAll(/"(\w+)"/g)].map((m) => m[1]);
  assert.deepStrictEqual(names, Object.values(END_REASONS));
  if (native.native) assert.deepStrictEqual([...native.binding.endReasons], Object.values(END_REASONS));
  // No magic end codes are left in the binding (the channel's files:
  // native_channel* and its collaborators').
  const dir = path.join(root, 'src/binding');
  const channelFiles = /^(native_channel|channel_|message_batch|ring_side|segment_side|socket_spin)/;
  for (const f of fs.readdirSync(dir).filter((f) => channelFiles.test(f))) {
    assert.doesNotMatch(fs.readFileSync(path.join(dir, f), 'utf8'), /-100\d\b/, f);
  }
});

// System errors travel by name: nothing in lib/ compares an errno number.
test('lib/ compares no raw errno numbers', () => {
  const files = [];
  (function walk(dir) {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p); else if (e.name.endsWith('.js')) files.push(p);
    }
  })(path.join(root, 'lib'));
  for (const file of files) {
    const src = fs.readFileSync(file, 'utf8');
    assert.doesNotMatch(src, /-\s*errno\.[A-Z]|constants\.errno\.[A-Z]|\berrno\.E[A-Z]+/, path.relative(root, file));
  }
});

// The native and the fallback unix/TCP servers share SocketServerBase (the
// state, address(), ref and unref), never each other.
test('the fallback server derives from the shared unix/TCP base, not from the native Server', () => {
  const { ServerBase } = require('../lib/transport/server');
  const { Server, SocketServerBase } = require('../lib/transport/socket');
  const { FallbackServer } = require('../lib/transport/fallback');
  assert.strictEqual(Object.getPrototypeOf(SocketServerBase), ServerBase);
  assert.strictEqual(Object.getPrototypeOf(Server), SocketServerBase);
  assert.strictEqual(Object.getPrototypeOf(FallbackServer), SocketServerBase);
  assert.ok(!(FallbackServer.prototype instanceof Server));
});

// src/binding/ has one file pair per wrapped object, each on the shared
// HandleWrap base when it owns libuv handles, and addon.cc only registers.
// NativeChannel is declared in native_channel_impl.h, private to its own
// file and its collaborators' (channel_writer, channel_reader, ...).
test('the binding has one file per wrapped object', () => {
  const dir = path.join(root, 'src/binding');
  const wrapped = {
    native_channel: ['NativeChannel', 'native_channel_impl.h'],
    native_listener: ['NativeListener', 'native_listener.cc'],
    framer_wrap: ['FramerWrap', 'framer_wrap.cc'],
  };
  for (const [file, [cls, home]] of Object.entries(wrapped)) {
    const src = fs.readFileSync(path.join(dir, home), 'utf8');
    assert.match(src, new RegExp(`class ${cls}\\b`), `${cls} lives in ${home}`);
    assert.match(src, /final : public HandleWrap|class FramerWrap/, `${cls} in ${home}`);
    assert.ok(fs.existsSync(path.join(dir, `${file}.h`)), `${file}.h exists`);
    assert.ok(fs.existsSync(path.join(dir, `${file}.cc`)), `${file}.cc exists`);
  }
  const classes = new Map();
  for (const f of fs.readdirSync(dir).filter((f) => f.endsWith('.cc') || f.endsWith('_impl.h'))) {
    const src = fs.readFileSync(path.join(dir, f), 'utf8');
    for (const m of src.matchAll(/^class (Native\w+|\w+Wrap)\b/gm)) classes.set(m[1], f);
  }
  assert.deepStrictEqual(new Set(classes.values()).size, classes.size, `one wrapped object per file: ${[...classes]}`);
  const addon = fs.readFileSync(path.join(dir, 'addon.cc'), 'utf8');
  assert.doesNotMatch(addon, /^(class|void \w+\(const v8::FunctionCallbackInfo)/m, 'addon.cc only registers');
});

// Walks lib/'s require() graph from every file; a cycle makes module load
// order matter and hands some module a half-built exports object.
test('lib/ has no import cycle', () => {
  const files = [];
  (function walk(dir) {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p); else if (e.name.endsWith('.js')) files.push(p);
    }
  })(path.join(root, 'lib'));
  const edges = new Map();
  for (const file of files) {
    const src = fs.readFileSync(file, 'utf8');
    const deps = [];
    for (const m of src.matchAll(/require\('(\.{1,2}\/[^']+)'\)/g)) {
      deps.push(require.resolve(path.resolve(path.dirname(file), m[1])));
    }
    edges.set(file, deps);
  }
  const state = new Map();
  const stack = [];
  function visit(file) {
    if (state.get(file) === 'done') return;
    if (state.get(file) === 'open') {
      const cycle = stack.slice(stack.indexOf(file)).concat(file).map((f) => path.relative(root, f));
      assert.fail(`import cycle: ${cycle.join(' -> ')}`);
    }
    state.set(file, 'open');
    stack.push(file);
    for (const dep of edges.get(file) || []) visit(dep);
    stack.pop();
    state.set(file, 'done');
  }
  for (const file of files) visit(file);
});

// Capabilities come from the backend (lib/transport/contract.js): the
// channel decides from handle.capabilities, never by looking for methods,
// and never builds a native handle itself; other modules reach its
// internals through lib/channel/symbols.js, not underscore fields.
test('lib/channel/ never probes or builds its handle; no module reads a Channel\'s underscore fields', () => {
  const dir = path.join(root, 'lib', 'channel');
  const sources = [path.join(root, 'lib', 'channel.js'), ...fs.readdirSync(dir).map((f) => path.join(dir, f))];
  for (const file of sources) {
    const src = fs.readFileSync(file, 'utf8');
    const rel = path.relative(root, file);
    assert.doesNotMatch(src, /typeof (?:this\._handle|handle|this\[kHandle\])\.\w+\s*[!=]==?\s*'function'/,
      `${rel} probes a handle's methods with typeof`);
    assert.doesNotMatch(src, /new binding\.NativeChannel|\.owner\s*=/, `${rel} builds a native handle or sets owner`);
  }
  const underscore = /\b(channel|ch|this\.channel|host)\._(gate|handle|handles|handleHook|sendRaw|sendInternal|sendPlain|sendAnswer|sendWithDescriptor|setConsumer|setReadLimit|onInternal|onHelloDone|takesHandles|writeOutNow|handleAnnounce)\b/;
  (function walk(d) {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.js')) {
        assert.doesNotMatch(fs.readFileSync(p, 'utf8'), underscore, `${path.relative(root, p)} reads a Channel's underscore field`);
      }
    }
  })(path.join(root, 'lib'));
});

// Issue 30's bounds, measured with a parser (scripts/sizes.js, espree).
test('no class in lib/ is over 500 lines and no function over 150', () => {
  const { execFileSync } = require('child_process');
  const out = execFileSync(process.execPath, [path.join(root, 'scripts', 'sizes.js')], { encoding: 'utf8' });
  assert.match(out, / 0 over the bounds/, out);
});

// Internals other modules need are symbols (lib/channel/symbols.js,
// lib/transport/symbols.js, lib/pool/symbols.js): a module reads an
// underscore field only where it defines it itself, or where the field is
// Node's own (a ChildProcess's, a net.Server's, a socket's, process's),
// which the ChildProcess surface keeps as Node does.
test('no module in lib/ reads an underscore field another module defines', () => {
  const NODE_FIELDS = new Set(['_handle', '_httpMessage', '_handleQueue', '_pendingMessage', '_send', '_disconnect',
    '_closesNeeded', '_closesGot', '_channel', '_setupWorker', '_connectionKey', '_connections', '_listen2',
    // v8.Deserializer's, for a host object's bytes.
    '_readRawBytes',
    // Module's, which procwire/register watches on Node 20 only (no
    // module.require diagnostics channel there) until the first fork.
    '_load']);
  const found = [];
  (function walk(d) {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) {
        walk(p);
        continue;
      }
      if (!e.name.endsWith('.js')) continue;
      // Comments say why, and may name Node's fields; only code counts.
      const src = fs.readFileSync(p, 'utf8').replace(/\/\/.*$/gm, '').replace(/\/\*[\s\S]*?\*\//g, '');
      const own = new Set();
      // Set here: assigned, or a destructuring target ({ a: this._a } = ...).
      for (const m of src.matchAll(/\bthis\.(_[A-Za-z]\w*)\s*(?:=[^=]|[,}])/g)) own.add(m[1]);
      for (const m of src.matchAll(/^\s*(?:static\s+|async\s+|get\s+|set\s+)*(_[A-Za-z]\w*)\s*\(/gm)) own.add(m[1]);
      for (const m of src.matchAll(/\b(\w+)\.(_[A-Za-z]\w*)\b/g)) {
        const [, receiver, field] = m;
        if (receiver === 'process' || NODE_FIELDS.has(field) || own.has(field)) continue;
        found.push(`${path.relative(root, p)}: ${receiver}.${field}`);
      }
    }
  })(path.join(root, 'lib'));
  assert.deepStrictEqual([...new Set(found)], []);
});

// The same bounds in src/ (and no C++ file over 600 lines), measured by
// scripts/cxx-sizes.py, which sums each class's member functions over its
// files (a heuristic brace parser; it exits 1 over the bounds).
test('no class in src/ is over 500 lines, no function over 150, no C++ file over 600', () => {
  const { spawnSync } = require('child_process');
  const sources = [];
  for (const dir of ['src/binding', 'src/core']) {
    for (const f of fs.readdirSync(path.join(root, dir)).sort()) {
      if (/\.(cc|h)$/.test(f)) sources.push(path.join(root, dir, f));
    }
  }
  const r = spawnSync('python3', [path.join(root, 'scripts', 'cxx-sizes.py'), ...sources], { encoding: 'utf8' });
  assert.ifError(r.error);
  assert.strictEqual(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /^ {2}NativeChannel: \d+ lines/m, 'the class totals are reported');
});
