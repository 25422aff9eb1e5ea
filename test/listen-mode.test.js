'use strict';
// A unix listener's socket file is made 0600 without touching the
// process-wide umask: under a permissive umask the file is still private,
// the umask is what it was, and files other threads create meanwhile get
// the mode their own umask gives them.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { Worker } = require('worker_threads');
const procwire = require('..');

// The process's umask, read without setting it (process.umask() with no
// argument is deprecated because it has to set the mask to read it).
function currentUmask() {
  const line = fs.readFileSync('/proc/self/status', 'utf8').split('\n').find((l) => l.startsWith('Umask:'));
  return parseInt(line.split(/\s+/)[1], 8);
}

function tempDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pw-mode-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('a unix socket file is 0600 under umask 000, and the umask is left alone', { timeout: 20_000 }, async (t) => {
  const dir = tempDir(t);
  const old = process.umask(0o000);
  t.after(() => process.umask(old));
  const file = path.join(dir, 'open.sock');
  const server = procwire.listen(file, { auth: false });
  try {
    await server.ready;
    assert.strictEqual(currentUmask(), 0o000, 'the umask is unchanged');
    const st = fs.lstatSync(file);
    assert.ok(st.isSocket());
    assert.strictEqual(st.mode & 0o777, 0o600);
    // The socket works: a client of the same user connects.
    const ch = await procwire.connect(file, { auth: false });
    ch.destroy();
  } finally {
    server.close();
  }
});

test('files created by another thread while listeners bind keep their umask mode', { timeout: 60_000 }, async (t) => {
  const dir = tempDir(t);
  const old = process.umask(0o000);
  t.after(() => process.umask(old));
  const filesDir = path.join(dir, 'files');
  fs.mkdirSync(filesDir);
  // The worker creates files with mode 0666 until told to stop; under umask
  // 000 each must be 0666. A listener that narrowed the process-wide umask
  // while binding would give some of them 0600 (or less).
  const stopBuffer = new SharedArrayBuffer(4);
  const stop = new Int32Array(stopBuffer);
  const worker = new Worker(`
    const { parentPort, workerData } = require('worker_threads');
    const fs = require('fs');
    const path = require('path');
    const stop = new Int32Array(workerData.stop);
    let n = 0;
    let bad;
    parentPort.postMessage({ started: true });
    while (Atomics.load(stop, 0) === 0 && n < 1000000) {
      const f = path.join(workerData.dir, String(n++));
      fs.closeSync(fs.openSync(f, 'wx', 0o666));
      const mode = fs.statSync(f).mode & 0o777;
      fs.unlinkSync(f);
      if (mode !== 0o666) { bad = mode; break; }
    }
    parentPort.postMessage({ done: n, bad });
  `, { eval: true, workerData: { dir: filesDir, stop: stopBuffer } });
  let result;
  const finished = new Promise((resolve, reject) => {
    worker.on('message', (m) => { if (m.done !== undefined) { result = m; resolve(); } });
    worker.on('error', reject);
  });
  await new Promise((resolve) => worker.once('message', resolve));
  try {
    for (let i = 0; i < 200; i++) {
      const file = path.join(dir, `s${i}.sock`);
      const server = procwire.listen(file, { auth: false });
      await server.ready;
      assert.strictEqual(fs.lstatSync(file).mode & 0o777, 0o600);
      server.close();
    }
  } finally {
    Atomics.store(stop, 0, 1);
    await finished;
    await worker.terminate();
  }
  assert.ok(result.done > 0, 'the worker created files meanwhile');
  assert.strictEqual(result.bad, undefined, `a file got mode ${result.bad && result.bad.toString(8)} while listeners bound`);
  assert.strictEqual(currentUmask(), 0o000);
});
