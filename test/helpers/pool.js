'use strict';
// What the pool tests share: a pool destroyed at the test's end, a coded
// rejection awaited within a deadline, and whether a pid is alive.

const assert = require('node:assert');
const path = require('path');
const procwire = require('../..');
const { Pool } = require('../../lib/pool');
const { withTimeout } = require('./wait');

const WORKER = path.join(__dirname, '..', 'fixtures', 'pool-worker.js');
const STEP = 20_000;

// pool(t, options) with these defaults: a pool the test destroys at its
// end whatever happened.
function poolMaker(defaults) {
  return (t, options) => {
    const p = new Pool({ filename: WORKER, ...defaults, ...options });
    t.after(() => p.destroy());
    return p;
  };
}

async function rejects(promise, code) {
  const err = await withTimeout(promise.then(() => null, (e) => e), STEP, code);
  assert.ok(err, `expected a rejection with ${code}`);
  assert.strictEqual(err.code, code, err.stack);
  assert.ok(err instanceof procwire.errors.ProcwireError);
  return err;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

module.exports = { poolMaker, rejects, alive, WORKER, STEP };
