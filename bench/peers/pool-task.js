'use strict';
// The pool suite's task, one module for every pool: a small task { a, b }
// gives a + b; a Buffer gives its length plus its first and last bytes (the
// worker reads the data, as real work would).
// workerpool and jest-worker load it through their own entry points
// (pool-task-workerpool.js; jest-worker calls the named export `task`).

function task(value) {
  // A pool whose channel is JSON (tinypool's child_process runtime) hands
  // the worker a Buffer as { type: 'Buffer', data: [...] }.
  if (value !== null && typeof value === 'object' && value.type === 'Buffer' && Array.isArray(value.data)) value = value.data;
  if (value !== null && typeof value === 'object' && typeof value.length === 'number') {
    return value.length + value[0] + value[value.length - 1];
  }
  return value.a + value.b;
}

module.exports = task;
module.exports.task = task;
