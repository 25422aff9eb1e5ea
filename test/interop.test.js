'use strict';
// Interop with real Node children that use only the built-in process.send /
// process.on('message'). This file re-runs itself as the child:
//   node interop.test.js child <mode>  sends the corpus, then checks what it gets
//   node interop.test.js echo          sends back every message it receives

const assert = require('assert');
const path = require('path');
const corpus = require('./fixtures/corpus');

const SENTINEL = '__procwire_interop__';

function casesFor(mode) {
  const cases = corpus.build().filter((c) => (mode === 'json' ? c.json : c.send));
  // guard against a filter that silently drops the corpus
  assert.ok(cases.length > (mode === 'json' ? 50 : 90), `${mode}: only ${cases.length} cases`);
  return cases;
}

function checkCase(mode, c, m, label) {
  if (mode === 'json') assert.deepStrictEqual(m, corpus.jsonExpected(c), `${c.name} (${label})`);
  else corpus.assertCase(c, m, label);
}

function runChild(mode) {
  const cases = casesFor(mode);
  for (const c of cases) process.send(c.value);
  process.send({ [SENTINEL]: 'sent', count: cases.length });
  let i = 0;
  const failures = [];
  process.on('message', (m) => {
    if (m && m[SENTINEL] === 'done') {
      corpus.cleanupAll(cases);
      process.send({ [SENTINEL]: 'checked', count: i, failures }, () => process.disconnect());
      return;
    }
    const c = cases[i++];
    if (!c) {
      failures.push(`unexpected extra message #${i}`);
      return;
    }
    try {
      checkCase(mode, c, m, 'child received');
    } catch (err) {
      failures.push(`${c.name}: ${String(err.message).slice(0, 600)}`);
    }
  });
}

function runEcho() {
  process.on('message', (m) => {
    if (m && m[SENTINEL] === 'bye') {
      process.disconnect();
      return;
    }
    process.send(m);
  });
}

if (process.argv[2] === 'child') {
  runChild(process.argv[3]);
} else if (process.argv[2] === 'echo') {
  runEcho();
} else {
  parentTests();
}

function parentTests() {
  const { describe, test } = require('node:test');
  const { spawn } = require('child_process');
  const procwire = require('..');
  const T = { timeout: 120000 };

  function childEnv(extra) {
    const env = { ...process.env, ...extra };
    // Not a test-runner child: its output must not reach the runner.
    delete env.NODE_TEST_CONTEXT;
    return env;
  }

  function waitExit(child) {
    if (child.exitCode !== null || child.signalCode !== null) {
      return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
    }
    return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  }

  function killIfAlive(child) {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }

  // A queue of incoming messages with an awaitable "next".
  function inbox() {
    const items = [];
    const waiters = [];
    let failure = null;
    return {
      put(m) {
        if (waiters.length) waiters.shift().resolve(m);
        else items.push(m);
      },
      fail(err) {
        failure = err;
        while (waiters.length) waiters.shift().reject(err);
      },
      next() {
        if (items.length) return Promise.resolve(items.shift());
        if (failure) return Promise.reject(failure);
        return new Promise((resolve, reject) => waiters.push({ resolve, reject }));
      },
    };
  }

  function failures(mode, cases, messages, label) {
    const out = [];
    if (messages.length !== cases.length) out.push(`${label}: got ${messages.length} messages, want ${cases.length}`);
    cases.forEach((c, i) => {
      if (i >= messages.length) return;
      try {
        checkCase(mode, c, messages[i], label);
      } catch (err) {
        out.push(`${c.name}: ${String(err.message).slice(0, 600)}`);
      }
    });
    return out;
  }

  for (const mode of ['advanced', 'json']) {
    describe(`${mode}: raw socket to a plain Node child`, () => {
      test(`Node child -> procwire.Framer, procwire frames -> Node child (${mode})`, T, async () => {
        const child = spawn(process.execPath, [__filename, 'child', mode], {
          stdio: ['ignore', 'ignore', 'pipe', 'pipe'],
          env: childEnv({ NODE_CHANNEL_FD: '3', NODE_CHANNEL_SERIALIZATION_MODE: mode }),
        });
        let stderr = '';
        child.stderr.setEncoding('utf8');
        child.stderr.on('data', (d) => { stderr += d; });
        const box = inbox();
        const framerErrors = [];
        const cases = casesFor(mode);
        try {
          const sock = child.stdio[3];
          const framer = new procwire.Framer({ serialization: mode, onError: (e) => framerErrors.push(e) });
          let chunks = 0;
          sock.on('data', (chunk) => {
            chunks++;
            for (const m of framer.push(chunk)) box.put(m);
          });
          sock.on('error', (err) => box.fail(err));
          child.on('exit', (code, signal) => box.fail(new Error(`child exited (${code}, ${signal}): ${stderr}`)));

          const received = [];
          for (;;) {
            const m = await box.next();
            if (m && m[SENTINEL] === 'sent') {
              assert.strictEqual(m.count, cases.length);
              break;
            }
            received.push(m);
          }
          assert.deepStrictEqual(framerErrors, []);
          assert.deepStrictEqual(failures(mode, cases, received, 'parent received'), []);
          assert.ok(chunks > 1, 'the stream arrived in several reads');

          // The other way: procwire's frames, Node's reader.
          for (const c of cases) sock.write(procwire.codec[mode].encode(c.value));
          sock.write(procwire.codec[mode].encode({ [SENTINEL]: 'done' }));
          const report = await box.next();
          assert.strictEqual(report[SENTINEL], 'checked');
          assert.deepStrictEqual(report.failures, []);
          assert.strictEqual(report.count, cases.length);
          const { code, signal } = await waitExit(child);
          assert.strictEqual(signal, null, stderr);
          assert.strictEqual(code, 0, stderr);
          assert.strictEqual(framer.buffering, 0);
        } finally {
          corpus.cleanupAll(cases);
          killIfAlive(child);
          await waitExit(child);
        }
      });
    });

    describe(`${mode}: procwire.fork with a plain Node child`, () => {
      test(`echo of the whole corpus, in order (${mode})`, T, async () => {
        const cases = casesFor(mode);
        const child = procwire.fork(path.join(__dirname, 'interop.test.js'), ['echo'], {
          serialization: mode, child: 'node', stdio: ['ignore', 'ignore', 'pipe', 'ipc'], env: childEnv({}),
        });
        let stderr = '';
        child.stderr.setEncoding('utf8');
        child.stderr.on('data', (d) => { stderr += d; });
        const box = inbox();
        try {
          child.on('message', (m) => box.put(m));
          child.on('error', (err) => box.fail(err));
          child.on('exit', (code, signal) => box.fail(new Error(`child exited (${code}, ${signal}): ${stderr}`)));
          for (const c of cases) child.send(c.value);
          const received = [];
          while (received.length < cases.length) received.push(await box.next());
          assert.deepStrictEqual(failures(mode, cases, received, 'echoed'), []);
          child.send({ [SENTINEL]: 'bye' });
          const { code, signal } = await waitExit(child);
          assert.strictEqual(signal, null, stderr);
          assert.strictEqual(code, 0, stderr);
        } finally {
          corpus.cleanupAll(cases);
          killIfAlive(child);
          await waitExit(child);
        }
      });

      test(`child sends the corpus first, then checks ours (${mode})`, T, async () => {
        const cases = casesFor(mode);
        const child = procwire.fork(path.join(__dirname, 'interop.test.js'), ['child', mode], {
          serialization: mode, child: 'node', stdio: ['ignore', 'ignore', 'pipe', 'ipc'], env: childEnv({}),
        });
        let stderr = '';
        child.stderr.setEncoding('utf8');
        child.stderr.on('data', (d) => { stderr += d; });
        const box = inbox();
        try {
          child.on('message', (m) => box.put(m));
          child.on('error', (err) => box.fail(err));
          child.on('exit', (code, signal) => box.fail(new Error(`child exited (${code}, ${signal}): ${stderr}`)));
          const received = [];
          for (;;) {
            const m = await box.next();
            if (m && m[SENTINEL] === 'sent') break;
            received.push(m);
          }
          assert.deepStrictEqual(failures(mode, cases, received, 'parent received'), []);
          for (const c of cases) child.send(c.value);
          child.send({ [SENTINEL]: 'done' });
          const report = await box.next();
          assert.strictEqual(report[SENTINEL], 'checked');
          assert.deepStrictEqual(report.failures, []);
          assert.strictEqual(report.count, cases.length);
          const { code, signal } = await waitExit(child);
          assert.strictEqual(signal, null, stderr);
          assert.strictEqual(code, 0, stderr);
        } finally {
          corpus.cleanupAll(cases);
          killIfAlive(child);
          await waitExit(child);
        }
      });
    });
  }
}
