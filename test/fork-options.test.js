'use strict';
// fork() with a bad option throws before the child exists: no orphan runs
// the module with nobody holding its ChildProcess. The child re-runs this
// file and leaves a marker file, so a child that was spawned anyway shows.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const procwire = require('..');

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
