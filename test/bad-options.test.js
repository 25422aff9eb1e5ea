'use strict';
// A bad channel option fails the call that takes it, before anything
// exists: fork() spawns no child (no orphan runs the module with nobody
// holding its ChildProcess; the child re-runs this file and leaves a marker
// file, so a child spawned anyway shows), listen() binds nothing (a bad
// option would otherwise throw at each accepted connection, with nobody to
// catch it), and connect() opens no socket.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const procwire = require('..');
const { uniqueName } = require('./helpers/pair');
const { fdSnapshot, fdsOpenedSince } = require('./helpers/fds');

if (process.argv[2] === 'child-marker') {
  fs.writeFileSync(process.argv[3], 'ran');
  return;
}

const BAD_OPTIONS = [
  { highWaterMark: 2 ** 60 },
  { maxQueuedBytes: -1 },
  { maxMessageSize: -5 },
  { outOfLine: 'sometimes' },
  { outOfLineThreshold: 'big' },
  { rings: 'yes' },
  { requestTimeout: -1 },
  { maxSegmentsInFlight: 1.5 },
  { segmentPool: 'x' },
  { segmentPoolMaxBytes: -1 },
  { segmentPoolMaxCount: 2 ** 20 },
  { segmentPoolIdleTimeout: NaN },
  { maxConcurrentRequests: 0 },
];

test('a bad channel option throws a coded error before any child is spawned', { timeout: 30_000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-fork-options-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const markers = [];
  for (const [i, options] of BAD_OPTIONS.entries()) {
    const marker = path.join(dir, `child-${i}`);
    markers.push(marker);
    assert.throws(() => procwire.fork(__filename, ['child-marker', marker], options),
      { code: 'ERR_PROCWIRE_INVALID_ARG' }, JSON.stringify(options));
  }
  // A good fork in the same place does run its child, so the markers would
  // show a child spawned by a failed fork.
  const good = path.join(dir, 'child-good');
  const child = procwire.fork(__filename, ['child-marker', good]);
  await new Promise((resolve) => child.once('exit', resolve));
  assert.strictEqual(fs.readFileSync(good, 'utf8'), 'ran');
  for (const marker of markers) assert.strictEqual(fs.existsSync(marker), false, `a child ran for ${marker}`);
});

test('listen() and connect() refuse a bad channel option at once, with nothing bound, opened or leaked', { timeout: 30_000 }, async () => {
  const name = uniqueName('opts');
  const server = procwire.listen(name);
  await server.ready;
  let accepted = 0;
  server.on('channel', (ch) => { accepted++; ch.destroy(); });
  try {
    const before = fdSnapshot();
    for (const options of BAD_OPTIONS) {
      const what = JSON.stringify(options);
      assert.throws(() => procwire.listen(uniqueName('bad'), options), { code: 'ERR_PROCWIRE_INVALID_ARG' }, what);
      assert.throws(() => procwire.listen({ port: 0, host: '127.0.0.1' }, options), { code: 'ERR_PROCWIRE_INVALID_ARG' }, what);
      await assert.rejects(procwire.connect(name, options), { code: 'ERR_PROCWIRE_INVALID_ARG' }, what);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.strictEqual(accepted, 0, 'no connection reached the server');
    assert.deepStrictEqual(fdsOpenedSince(before), [], 'no descriptor leaked');
    // The server still serves a good connection.
    const client = await procwire.connect(name);
    client.destroy();
  } finally {
    server.close();
  }
});
