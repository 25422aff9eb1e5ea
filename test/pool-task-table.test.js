'use strict';
// lib/pool/task-table.js against a Map: random adds and deletes of ids in
// the patterns a pool gives one worker (consecutive runs, every other or
// every fourth id, ids past 2 ** 32), deleted or taken, with get, size and
// values() compared after every step and at the end.

const test = require('node:test');
const assert = require('node:assert');
const { prng } = require('./helpers/prng');
const { TaskTable } = require('../lib/pool/task-table');

function exercise(first, step, seed) {
  const random = prng(seed);
  const table = new TaskTable();
  const model = new Map();
  let next = first;
  for (let k = 0; k < 5000; k++) {
    if (random() < 0.52) {
      const task = { id: next };
      next += step * (1 + Math.floor(random() * 2));
      table.add(task);
      model.set(task.id, task);
    } else {
      const ids = [...model.keys()];
      const id = ids.length > 0 && random() < 0.9 ? ids[Math.floor(random() * ids.length)] : next + 1;
      if (random() < 0.5) {
        assert.strictEqual(table.delete(id), model.delete(id));
      } else {
        assert.strictEqual(table.take(id), model.get(id));
        model.delete(id);
      }
    }
    assert.strictEqual(table.size, model.size);
  }
  for (const [id, task] of model) assert.strictEqual(table.get(id), task);
  assert.strictEqual(table.get(next + 1), undefined);
  assert.deepStrictEqual(table.values(), [...model.values()].sort((a, b) => a.id - b.id));
  table.clear();
  assert.strictEqual(table.size, 0);
  assert.deepStrictEqual(table.values(), []);
}

test('the task table holds what a Map holds, whatever the ids\' pattern', () => {
  let seed = 1;
  for (const first of [1, 2 ** 32 - 7, 2 ** 40 + 3]) {
    for (const step of [1, 2, 4, 32]) exercise(first, step, seed++);
  }
});
