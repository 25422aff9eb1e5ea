'use strict';
// The pure-JavaScript fallback (lib/fallback/binding.js) against the native
// addon:
//   - "bindings match fallback": for the whole shared corpus, both encode the
//     same bytes, each decodes the other's, both framers agree, hostile
//     payloads get the same error codes; and a native process talks to a
//     fallback process over a fork channel and a named channel;
//   - the existing suites (conformance over every transport, channel, codec,
//     framer) pass with PROCWIRE_FORCE_FALLBACK=1;
//   - lib/ keeps none of the old imitation of system calls (private Node
//     APIs, a replaced process.nextTick, umask changes, fake descriptors);
//   - fork() under the fallback runs a plain Node child over libuv's pipe.

const { describe, test } = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const crypto = require('crypto');
const path = require('path');
const { once } = require('events');
const procwire = require('..');
const corpus = require('./fixtures/corpus');
const { makeError } = require('../lib/errors');
const { withTimeout, exitOf, unlessExited, killChild } = require('./helpers/wait');
const { spawnGroup, killGroup } = require('./helpers/group');

const T = { timeout: 60_000 };
const ROOT = path.join(__dirname, '..');
const PEER = path.join(__dirname, 'helpers', 'peer.js');
const NO_NATIVE = !procwire.native && 'the native addon is not loaded here: nothing to compare the fallback with';

const native = require('../lib/native').binding;
const fallback = require('../lib/fallback/binding');
fallback.setup(Buffer, makeError);

function outcome(fn) {
  try {
    return { value: fn() };
  } catch (err) {
    return { err };
  }
}

describe('bindings match fallback', { skip: NO_NATIVE }, () => {
  test('encode: identical bytes (or the same error code) for every corpus case, both formats', T, () => {
    const cases = corpus.build();
    try {
      let compared = 0;
      for (const c of cases) {
        for (const format of c.json ? [0, 1] : [0]) {
          // V8's bytes for a representation case are the ordinary value's.
          const a = outcome(() => native.encode(format, format === 0 && c.canonical ? c.canonical() : c.value));
          const b = outcome(() => fallback.encode(format, c.value));
          const what = `${c.name} (${format === 0 ? 'advanced' : 'json'})`;
          if (a.err || b.err) {
            assert.ok(a.err && b.err, `${what}: native ${a.err ? 'threw' : 'encoded'}, fallback ${b.err ? `threw ${b.err.stack}` : 'encoded'}`);
            assert.strictEqual(b.err.code, a.err.code, what);
            continue;
          }
          assert.ok(Buffer.isBuffer(b.value), what);
          assert.ok(a.value.equals(b.value), `${what}: bytes differ`);
          compared++;
        }
      }
      assert.ok(compared > 150, `only ${compared} encodings compared`);
    } finally {
      corpus.cleanupAll(cases);
    }
  });

  test('decode: each decodes the other\'s bytes to the case\'s value', T, () => {
    const cases = corpus.build();
    try {
      for (const c of cases) {
        const fromNative = native.encode(0, c.value);
        const fromFallback = fallback.encode(0, c.value);
        corpus.assertCase(c, fallback.decode(0, fromNative.subarray(4)), 'fallback decodes native');
        corpus.assertCase(c, native.decode(0, fromFallback.subarray(4)), 'native decodes fallback');
        if (c.json) {
          const j = native.encode(1, c.value);
          assert.deepStrictEqual(fallback.decode(1, j.subarray(0, j.length - 1)), corpus.jsonExpected(c), c.name);
        }
      }
    } finally {
      corpus.cleanupAll(cases);
    }
  });

  test('hostile and truncated payloads: same error codes, same accepted values', T, () => {
    const samples = corpus.build().filter((c) => !c.large);
    const payloads = samples.map((c) => native.encode(0, c.value).subarray(4));
    corpus.cleanupAll(samples);
    let seed = 99;
    const rand = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed >>> 8;
    };
    const inputs = [];
    for (const p of payloads) {
      for (let n = 0; n < p.length; n += Math.max(1, p.length >> 5)) inputs.push(Buffer.from(p.subarray(0, n)));
    }
    for (let i = 0; i < 4000; i++) {
      const buf = Buffer.from(payloads[rand() % payloads.length]);
      const pos = 2 + (rand() % Math.max(1, buf.length - 2));
      if (pos < buf.length) buf[pos] = rand() & 0xff;
      inputs.push(buf);
    }
    const host = (...rest) => Buffer.from([0xff, 0x0f, 0x5c, ...rest]);
    inputs.push(host(2, 1, 1, 0), host(0, 14, 1, 0), host(0, 5, 3, 1, 2, 3), host(0, 1, 10, 1, 2), host(1, 0x49, 0x02),
      host(), Buffer.alloc(0), Buffer.from('ff104902', 'hex'));
    let rejected = 0;
    for (const input of inputs) {
      const a = outcome(() => native.decode(0, input));
      const b = outcome(() => fallback.decode(0, input));
      const what = input.toString('hex').slice(0, 120);
      if (a.err || b.err) {
        assert.ok(a.err && b.err, `${what}: native ${a.err ? a.err.code : 'accepted'}, fallback ${b.err ? b.err.code : 'accepted'}`);
        assert.strictEqual(b.err.code, a.err.code, what);
        rejected++;
        continue;
      }
      // Both accepted: Node's encoder writes the same bytes for both values.
      assert.ok(corpus.meaningBytes(a.value).equals(corpus.meaningBytes(b.value)), what);
    }
    assert.ok(rejected > 100, `only ${rejected} rejections`);
  });

  test('framers: same messages, errors and fatal error for a stream in random pieces', T, () => {
    const cases = corpus.build().filter((c) => !c.cleanup && c.send);
    const frames = cases.map((c) => native.encode(0, c.value));
    // A corrupt (but well framed) payload in the middle, an oversize header at the end.
    const bad = Buffer.from([0, 0, 0, 3, 0xff, 0x0f, 0x5c]);
    const stream = Buffer.concat([...frames.slice(0, 5), bad, ...frames.slice(5), Buffer.from('ffffffff00', 'hex')]);
    let seed = 7;
    const rand = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed >>> 8;
    };
    const run = (Framer) => {
      const framer = new Framer(0, 64 << 20);
      const out = { messages: [], errors: [], fatal: [] };
      for (let at = 0; at < stream.length;) {
        const n = 1 + (rand() % 70000);
        const [messages, errors, fatal] = framer.push(stream.subarray(at, at + n));
        at += n;
        if (errors) for (let i = 0; i < errors.length; i += 2) out.errors.push([out.messages.length + errors[i], errors[i + 1].code]);
        out.messages.push(...messages);
        if (fatal) out.fatal.push([fatal.code, fatal.message]);
      }
      out.buffering = framer.buffering();
      return out;
    };
    seed = 7;
    const a = run(native.NativeFramer);
    seed = 7;
    const b = run(fallback.NativeFramer);
    assert.strictEqual(b.messages.length, cases.length);
    cases.forEach((c, i) => corpus.assertCase(c, b.messages[i], `fallback framer #${i}`));
    assert.strictEqual(a.messages.length, b.messages.length);
    assert.deepStrictEqual(b.errors, a.errors);
    assert.deepStrictEqual(b.fatal.slice(0, 1), a.fatal.slice(0, 1));
    assert.strictEqual(b.fatal[0][0], 'ERR_PROCWIRE_MESSAGE_TOO_LARGE');
    // json lines, with a line over the maximum
    const jn = new native.NativeFramer(1, 10);
    const jf = new fallback.NativeFramer(1, 10);
    for (const chunk of ['{"a":1}\n[1,', '2]\n{bad}\n"x"', '\n', '"0123456789"\n']) {
      const x = jn.push(Buffer.from(chunk));
      const y = jf.push(Buffer.from(chunk));
      assert.deepStrictEqual(y[0], x[0], chunk);
      assert.deepStrictEqual(y[1] && y[1].map((e) => (typeof e === 'number' ? e : e.code)), x[1] && x[1].map((e) => (typeof e === 'number' ? e : e.code)), chunk);
      assert.deepStrictEqual(y[2] && [y[2].code, y[2].message], x[2] && [x[2].code, x[2].message], chunk);
      assert.strictEqual(jf.buffering(), jn.buffering(), chunk);
    }
  });

  test('a native parent and a fallback child talk over a fork channel, both ways', { timeout: 60_000 }, async (t) => {
    const cases = corpus.build().filter((c) => c.send && !c.cleanup);
    // outOfLine 'never': the JS fallback cannot receive descriptors, so it
    // cannot take shared-memory segments (large views) from a native peer.
    const child = procwire.fork(PEER, ['procwire'], {
      child: 'procwire', serialization: 'advanced', env: { ...process.env, PROCWIRE_FORCE_FALLBACK: '1' },
      stdio: ['inherit', 'inherit', 'pipe', 'ipc'],
      outOfLine: 'never',
    });
    child.stderr.resume();
    const exited = exitOf(child);
    // child.channel is null once disconnected: keep our own.
    const channel = child.channel;
    t.after(() => {
      channel.destroy();
      return killChild(child, exited);
    });
    const got = [];
    const done = new Promise((resolve) => {
      channel.on('message', (m) => {
        got.push(m);
        if (got.length === cases.length) resolve();
      });
    });
    cases.forEach((c, i) => child.send({ op: 'echo', i, v: c.value }));
    await withTimeout(unlessExited(done, exited, 'the echoes'), 30_000, 'the echoes');
    got.forEach((m, i) => {
      assert.strictEqual(m.i, i);
      corpus.assertCase(cases[i], m.v, 'echoed by the fallback child');
    });
    assert.deepStrictEqual(await channel.request({ x: 1 }, { timeout: 10_000 }), { echo: { x: 1 } });
  });

  test('a fallback client connects to a native named server (key-file handshake included)', { timeout: 60_000 }, async (t) => {
    const name = `fb-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
    const server = procwire.listen(name);
    let channel = null;
    t.after(() => {
      if (channel !== null) channel.destroy();
      server.close();
    });
    await server.ready;
    const gotChannel = once(server, 'channel');
    const child = childProcess.spawn(process.execPath, [PEER, 'named', name], {
      stdio: ['inherit', 'inherit', 'pipe'], env: { ...process.env, PROCWIRE_FORCE_FALLBACK: '1' },
    });
    child.stderr.resume();
    const exited = exitOf(child);
    t.after(() => killChild(child, exited));
    // A peer that dies before it connects fails the test at once.
    [channel] = await withTimeout(unlessExited(gotChannel, exited, 'its connection'), 20_000, 'the fallback client');
    channel.send({ op: 'echo', v: [1, 'two', Buffer.from('three')] });
    const [m] = await withTimeout(once(channel, 'message'), 10_000, 'the echo');
    assert.deepStrictEqual(m, { op: 'echo', v: [1, 'two', Buffer.from('three')] });
    channel.destroy();
  });
});

// The existing suites, whole, through the fallback. Run once per Node line
// like every other file here; one child `node --test` process. It takes
// about half a minute; the limits leave this file well inside the 600 s
// scripts/test.sh gives it.
test('conformance, channel, codec and framer suites pass through the JS fallback', { timeout: 300_000 }, async (t) => {
  const files = ['conformance', 'channel', 'codec', 'framer'].map((f) => path.join(__dirname, `${f}.test.js`));
  const env = { ...process.env, PROCWIRE_FORCE_FALLBACK: '1' };
  // Set by the outer test runner; the inner one must run as a runner too.
  delete env.NODE_TEST_CONTEXT;
  // In a process group of its own: the inner runner starts a process per
  // test file, and a kill at the deadline (or when this test ends) must
  // reach those as well, not only the runner.
  const child = spawnGroup(process.execPath,
    ['--test', '--test-concurrency=1', '--test-reporter=spec', ...files], {
      cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'],
    });
  const exited = exitOf(child);
  t.after(() => killGroup(child));
  let output = '';
  child.stdout.on('data', (d) => { output += d; });
  child.stderr.on('data', (d) => { output += d; });
  const timer = setTimeout(() => killGroup(child), 270_000);
  const { code, signal } = await exited;
  clearTimeout(timer);
  // Whatever the runner left behind in its group goes too.
  killGroup(child);
  const count = (word) => {
    const m = output.match(new RegExp(`^ℹ ${word} (\\d+)`, 'm'));
    return m ? Number(m[1]) : NaN;
  };
  t.diagnostic(`fallback suites: pass ${count('pass')}, fail ${count('fail')}, skipped ${count('skipped')}`);
  const failures = output.split('\n').filter((l) => /^\s*✖/.test(l)).slice(0, 20).join('\n');
  assert.strictEqual(code, 0,
    `fallback suites: exit ${code} ${signal || ''}, pass ${count('pass')}, fail ${count('fail')}, skipped ${count('skipped')}\n${failures}\n${output.slice(-3000)}`);
  assert.ok(count('pass') > 500, `only ${count('pass')} tests passed`);
  assert.strictEqual(count('fail'), 0);
});

// The fallback is a backend on public Node APIs: none of the old imitation
// of the addon's system calls may come back anywhere in lib/.
test('lib/ uses no private Node APIs, patched globals or fake descriptors', () => {
  const fs = require('fs');
  const forbidden = [
    [/\._listen2\b/, 'Node\'s private server._listen2'],
    [/process\.nextTick\s*=(?!=)/, 'a replaced process.nextTick'],
    [/process\.umask\s*\(/, 'a process-wide umask change'],
    [/spawnSync\s*\(/, 'a synchronous child process'],
    [/TOKEN_BASE|fake (fd|descriptor)/i, 'fake descriptor numbers'],
    [/\bglobal(This)?\.[A-Za-z_$]+\s*=(?!=)/, 'a patched global'],
  ];
  const files = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p); else if (e.name.endsWith('.js')) files.push(p);
    }
  };
  walk(path.join(ROOT, 'lib'));
  assert.ok(files.length > 20, `only ${files.length} files under lib/`);
  const hits = [];
  for (const file of files) {
    const lines = fs.readFileSync(file, 'utf8').split('\n');
    lines.forEach((line, i) => {
      if (/^\s*\/\//.test(line)) return;
      for (const [re, what] of forbidden) {
        if (re.test(line)) hits.push(`${path.relative(ROOT, file)}:${i + 1}: ${what}: ${line.trim()}`);
      }
    });
  }
  assert.deepStrictEqual(hits, []);
});

// fork() under the fallback: a plain Node child on Node's own IPC, the
// parent's end a net.Socket over the pipe libuv made; both formats, and the
// channel reports no descriptor-based capability.
test('fallback fork: a plain Node child talks both ways in both formats', { timeout: 60_000 }, async (t) => {
  const script = [
    "const procwire = require(process.argv[1]);",
    "const assert = require('assert');",
    "assert.strictEqual(procwire.native, false);",
    "const out = [];",
    "for (const serialization of ['json', 'advanced']) {",
    "  const child = procwire.fork(process.argv[2], [], { serialization, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });",
    "  child.send({ n: 1, s: 'x'.repeat(100000) });",
    "  child.on('message', (m) => { out.push([serialization, m.n, m.len]); child.disconnect(); });",
    "  child.on('exit', (code) => { out.push([serialization, 'exit', code]);",
    "    if (out.length === 4) process.stdout.write(JSON.stringify(out)); });",
    "}",
  ].join('\n');
  const echo = "process.on('message', (m) => process.send({ n: m.n + 1, len: m.s.length }));";
  const fsp = require('fs');
  const os = require('os');
  const dir = fsp.mkdtempSync(path.join(os.tmpdir(), 'pw-fb-'));
  const child = path.join(dir, 'echo.js');
  fsp.writeFileSync(child, echo);
  let p = null;
  t.after(() => {
    if (p !== null && p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    fsp.rmSync(dir, { recursive: true, force: true });
  });
  p = childProcess.spawn(process.execPath, ['-e', script, ROOT, child], {
    env: { ...process.env, PROCWIRE_FORCE_FALLBACK: '1' }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  p.stdout.on('data', (d) => { stdout += d; });
  p.stderr.on('data', (d) => { stderr += d; });
  const timer = setTimeout(() => p.kill('SIGKILL'), 50_000);
  const [code] = await once(p, 'exit');
  clearTimeout(timer);
  assert.strictEqual(code, 0, stderr);
  const out = JSON.parse(stdout);
  for (const s of ['json', 'advanced']) {
    assert.deepStrictEqual(out.filter((r) => r[0] === s).sort(), [[s, 2, 100000], [s, 'exit', 0]].sort());
  }
  // Exactly one PROCWIRE_FALLBACK warning.
  assert.strictEqual(stderr.match(/PROCWIRE_FALLBACK/g).length, 1, stderr);
});
