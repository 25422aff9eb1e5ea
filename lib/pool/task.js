'use strict';
// A pool task from run() to its settlement: one small object, its own
// AbortSignal listener, with no closure, timer or listener made for it
// unless it asked for a timeout or a signal. Its pool decides what happens
// to it (./pool.js); the timers here only tell the pool.

const { kCancel } = require('./symbols');

const QUEUED = 1;
const RUNNING = 2;
const CANCELLED = 3;  // rejected while its worker still runs it
const DONE = 4;

class Task {
  constructor(pool, id, task, name, transfer) {
    this.pool = pool;
    this.id = id;
    this.task = task;
    this.name = name;
    this.transfer = transfer;
    this.state = QUEUED;
    this.slot = null;
    this.signal = undefined;
    this.timer = null;
    // When it was queued and last dispatched: the pool clock's readings
    // (./histogram.js), shared by the tasks of a batch.
    this.enqueued = null;
    this.started = null;
    this.resolve = null;
    this.reject = null;
  }

  // The task's AbortSignal fired (the task is its own listener, so no
  // closure is made per task).
  handleEvent() {
    this.pool[kCancel](this, 'ERR_PROCWIRE_TASK_ABORTED', this.signal.reason);
  }
}

function onTimeout(task) {
  task.timer = null;
  task.pool[kCancel](task, 'ERR_PROCWIRE_TASK_TIMEOUT', undefined);
}

function onGraceOver(task) {
  task.timer = null;
  const slot = task.slot;
  if (task.state === CANCELLED && slot !== null && slot.tasks.get(task.id) === task) slot.kill('grace');
}

const isLive = (task) => task.state === QUEUED;

// The promise of a run() takes its resolve and reject without a closure per
// task: the executor runs synchronously and fills the task set here.
let filling = null;
function fill(resolve, reject) {
  filling.resolve = resolve;
  filling.reject = reject;
}

function promiseOf(task) {
  filling = task;
  const promise = new Promise(fill);
  filling = null;
  return promise;
}

module.exports = { Task, QUEUED, RUNNING, CANCELLED, DONE, isLive, promiseOf, onTimeout, onGraceOver };
