'use strict';
// A pool's channels keep more recycled shared-memory segments than a
// channel's default 16, each way: a worker (or the pool's process) hands one
// back only when V8 collects the Buffer over it, which at big tasks comes
// long after the 16th, and every task past the bound would take a fresh
// sealed segment. Here nothing is collected (both ends keep every Buffer),
// so the count of segments in use is the count of messages.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const { poolMaker } = require('./helpers/pool');
const { withTimeout } = require('./helpers/wait');

const KEEPER = path.join(__dirname, 'fixtures', 'pool-keeps-buffers.js');
const STEP = 20_000;
// Past the out-of-line threshold (256 KiB), so each goes through a segment.
const SIZE = 300 * 1024;
const MESSAGES = 24;

const pool = poolMaker({ filename: KEEPER, minWorkers: 1, maxWorkers: 1 });

// Descriptors this process holds now.
const openDescriptors = () => fs.readdirSync('/proc/self/fd').length;

test('a worker maps more than 16 of the pool\'s recycled segments for tasks it keeps', async (t) => {
  const p = pool(t);
  assert.strictEqual(await withTimeout(p.run(1), STEP, 'the first task'), 1);
  const before = openDescriptors();
  for (let i = 2; i <= MESSAGES; i++) {
    assert.strictEqual(await withTimeout(p.run(Buffer.alloc(SIZE, i)), STEP, `task ${i}`), i);
  }
  assert.strictEqual(await withTimeout(p.run(null, { name: 'mapped' }), STEP, 'mapped'), MESSAGES - 1);
  // The sending side keeps each segment mapped, not open: a pool of many
  // workers with many segments each must not run out of descriptors.
  const grew = openDescriptors() - before;
  assert.ok(grew < 4, `the pool's process opened ${grew} descriptors for ${MESSAGES - 1} segments`);
});

test('a worker sends more than 16 results in recycled segments while the pool keeps them', async (t) => {
  const p = pool(t);
  const results = [];
  for (let i = 0; i < MESSAGES; i++) {
    const buf = await withTimeout(p.run(SIZE, { name: 'give' }), STEP, `result ${i}`);
    assert.strictEqual(buf.length, SIZE);
    assert.strictEqual(buf[SIZE - 1], i);
    results.push(buf);
  }
  assert.strictEqual(await withTimeout(p.run(null, { name: 'own' }), STEP, 'own'), MESSAGES);
  assert.strictEqual(results.length, MESSAGES);
});
