'use strict';
// The tasks a pool worker has been given in this tick and not yet sent.
// Tasks dispatched to one worker in one run of the microtask queue (a burst
// of run() calls, or the follow-ups of a batch of results) go out as one
// message, so the channel frames, encodes, decodes and delivers one array
// instead of one per task: at small tasks that per-message cost is most of
// what the pool adds to its workers' own work.
//
// The wire (lib/pool/worker-runtime.js decodes it):
//   [id, task] or [id, task, name]                    one task
//   [ONE_NAME, id, task, id, task, ..., name]         several for one handler
//                                                     (name null: the default)
//   [BATCH, id, task, name, id, task, name, ...]      several, names mixed
// Ids start at 1, so a leading 0 or -1 cannot be a task's id. Most batches
// are for one handler, whose name then goes once: a task is two elements,
// not three, so the codec checks and writes less per task. A batch stays
// small enough (MAX_BATCH_TASKS) for the codec's fast path to encode it in
// either form (it declines arrays of 128 elements or more).
// Each task in it reaches the worker as its own value, sharing no object
// with another (../codec/separate.js), as when sent alone.

const { isDataView } = require('util').types;
const { makeError } = require('../errors');
const { separateElements } = require('../codec/separate');
const { typedArrayByteLength, dataViewByteLength } = require('../fallback/views');

const BATCH = 0;
const ONE_NAME = -1;
// At most 1 + 3 * 42 elements: below the codec's 128. Bigger batches (62
// tasks of one name) cost the parent a little less CPU per task, but made
// fewer, longer turns for the workers, and the pool's rate dropped.
const MAX_BATCH_TASKS = 42;
// A batch also goes once the tasks' own bytes (a task that is a Buffer or
// other view) reach this, and a task this big goes alone: it gains nothing
// from sharing a message, and a batch of them is one big message, which
// the worker can start on only once all of it has arrived.
const MAX_BATCH_VIEW_BYTES = 64 * 1024;

// The bytes of a task or answer that is a Buffer or other view, else 0,
// read with the engine's own getters: a subclass's byteLength getter is
// user code, which must not run (or throw) inside the pool.
function viewBytesOf(value) {
  if (!ArrayBuffer.isView(value)) return 0;
  return isDataView(value) ? dataViewByteLength.call(value) : typedArrayByteLength.call(value);
}

// A channel that closed (the worker hung up or is dying) does not throw on
// send(): it returns false and reports the error later, so the tasks would
// be lost in it and fail only at the worker's exit, or never if it lingers.
// Asked first, it refuses them here instead, and the pool queues them again.
function closedError(channel) {
  return channel.connected ? null : makeError('ERR_PROCWIRE_CHANNEL_CLOSED', 'the pool worker\'s channel is closed');
}

function oneName(tasks) {
  const name = tasks[0].name;
  for (let i = 1; i < tasks.length; i++) if (tasks[i].name !== name) return false;
  return true;
}

function oneNameBatch(tasks) {
  const message = separateElements([ONE_NAME], 2);
  for (let i = 0; i < tasks.length; i++) message.push(tasks[i].id, tasks[i].task);
  const name = tasks[0].name;
  message.push(name === undefined ? null : name);
  return message;
}

function mixedBatch(tasks) {
  const message = separateElements([BATCH], 3);
  for (const t of tasks) message.push(t.id, t.task, t.name === undefined ? null : t.name);
  return message;
}

class TaskOutbox {
  // sendOne(task) sends a single task and reports its own failure;
  // unsent(tasks, err) takes tasks a closed channel refused, oldest first;
  // sent(tasks) hears of a batch the channel took.
  constructor(channel, sendOne, unsent, sent) {
    this.channel = channel;
    this.sendOne = sendOne;
    this.unsent = unsent;
    this.sent = sent;
    this.tasks = [];
    this.viewBytes = 0;
    this.scheduled = false;
    this.flushLater = () => {
      this.scheduled = false;
      this.flush();
    };
  }

  add(task) {
    const bytes = viewBytesOf(task.task);
    if (bytes >= MAX_BATCH_VIEW_BYTES) {
      this.flush();
      this.sendOne(task);
      return;
    }
    this.tasks.push(task);
    this.viewBytes += bytes;
    if (this.tasks.length >= MAX_BATCH_TASKS || this.viewBytes >= MAX_BATCH_VIEW_BYTES) this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      queueMicrotask(this.flushLater);
    }
  }

  // Sends what waits, as one message; a single task keeps the single form.
  // A batch the channel refuses is sent task by task, so only the task that
  // cannot be encoded fails; a closed channel refuses them all at once. A
  // batch that only V8's serializer can write (a Map in a task, a view for
  // shared memory) is refused too, and so goes task by task.
  flush() {
    const tasks = this.tasks;
    if (tasks.length === 0) return;
    this.tasks = [];
    this.viewBytes = 0;
    const closed = closedError(this.channel);
    if (closed !== null) {
      this.unsent(tasks, closed);
      return;
    }
    if (tasks.length === 1) {
      this.sendOne(tasks[0]);
      return;
    }
    const message = oneName(tasks) ? oneNameBatch(tasks) : mixedBatch(tasks);
    try {
      this.channel.send(message);
    } catch (err) {
      if (err && err.code === 'ERR_PROCWIRE_CHANNEL_CLOSED') this.unsent(tasks, err);
      else for (const t of tasks) this.sendOne(t);
      return;
    }
    this.sent(tasks);
  }

  // Takes a task back before it goes out (it was cancelled); whether it
  // was here.
  remove(task) {
    const i = this.tasks.indexOf(task);
    if (i === -1) return false;
    this.tasks.splice(i, 1);
    this.viewBytes -= viewBytesOf(task.task);
    return true;
  }

  // The worker is gone: what waits is its pool's to settle, not to send.
  drop() {
    this.tasks = [];
    this.viewBytes = 0;
  }

  // What waits, taken back unsent (oldest first).
  take() {
    const tasks = this.tasks;
    this.tasks = [];
    this.viewBytes = 0;
    return tasks;
  }
}

module.exports = { TaskOutbox, BATCH, ONE_NAME, MAX_BATCH_TASKS, MAX_BATCH_VIEW_BYTES, viewBytesOf, closedError };
