'use strict';
// The child side of a procwire.Pool worker: loads the user's module (named
// by argv[2]), says it is ready, and answers tasks on procwire.parent.
//
// The wire, all on the channel's ordinary messages:
//   parent -> [id, task] or [id, task, name]   run a task (id > 0)
//   parent -> [-1, id, task, ..., name]        run several for one handler
//                                              (name null: the default one)
//   parent -> [0, id, task, name, ...]         run several, names mixed;
//                                              ./outbox.js
//   parent -> id                               abort task id (its signal fires)
//   child  -> 'ready'                          the module loaded; tasks may come
//   child  -> { loadError }                    it did not: the error, serialized
//   child  -> [id, result]                     task id returned result
//   child  -> [-id, { name, message, code, stack }]   task id threw
//   child  -> [0, ±id, result, ±id, result, ...]      several answers
// A handler that returns a value (not a promise) is answered at once, with
// no promise or closure of its own; the answers a batch of tasks gives at
// once go back as one message, as the batch came.

const path = require('path');
const url = require('url');
const { BATCH, ONE_NAME, MAX_BATCH_TASKS, MAX_BATCH_VIEW_BYTES, viewBytesOf } = require('./outbox');
// Only the channel to the parent: not the whole API, which a worker that
// needs none of it would load at every start. Opened here first.
const parent = require('../fork').openParent();
const { isMoved } = require('./move');
const { separateElements } = require('../codec/separate');
// The one serializeError in lib/, shared with the request responder.
const { serializeError } = require('../channel/requests');
const { TaskTable } = require('./task-table');

const DEFAULT = 'default';
let defaultHandler = null;
const handlers = new Map();
// Running async tasks whose handler takes a signal, by id (their Pending,
// which holds the AbortController). Not a Map: one whose entries come and
// go with every task made this process spend most of its time in the
// garbage collector (see ./task-table.js).
const abortable = new TaskTable();
// The answers given since the microtask queue last ran, sent together as
// [BATCH, ±id, answer, ...] once it runs again (or when the batch is full):
// the answers to a batch of tasks, sync or async, mostly go back as one
// message, as the batch came. A process that exits sends them first.
let answers = newAnswers();
let answersQueued = false;
const MAX_ANSWERS = 2 * MAX_BATCH_TASKS;
// Bytes of the answers that are Buffers or other views, bounded as a batch
// of tasks is (./outbox.js).
let answerViewBytes = 0;

// Each answer reaches the parent as its own value, as the tasks came (see
// ./outbox.js): two tasks answered with one object get one each.
function newAnswers() {
  return separateElements([BATCH], 2);
}

function reply(id, value) {
  const bytes = isMoved(value) ? MAX_BATCH_VIEW_BYTES : viewBytesOf(value);
  if (bytes >= MAX_BATCH_VIEW_BYTES) {
    // Its buffers go with a send of its own (a move's are handed over),
    // after the answers before it.
    flushAnswers();
    sendAnswer(id, value);
    return;
  }
  answers.push(id, value);
  answerViewBytes += bytes;
  answersAdded();
}

function fail(id, err) {
  answers.push(-id, serializeError(err));
  answersAdded();
}

function answersAdded() {
  if (answers.length > MAX_ANSWERS || answerViewBytes >= MAX_BATCH_VIEW_BYTES) flushAnswers();
  else if (!answersQueued) {
    answersQueued = true;
    queueMicrotask(flushQueuedAnswers);
  }
}

function flushQueuedAnswers() {
  answersQueued = false;
  flushAnswers();
}

// One message for the answers, unless one of them cannot be sent, or they
// can only be sent one by one (../codec/separate.js): then each goes on its
// own, so only a task whose answer cannot be sent fails.
function flushAnswers() {
  const out = answers;
  if (out.length === 1) return;
  answers = newAnswers();
  answerViewBytes = 0;
  if (out.length === 3) {
    sendAnswer(out[1], out[2]);
    return;
  }
  try {
    parent.send(out);
  } catch {
    for (let i = 1; i < out.length; i += 2) sendAnswer(out[i], out[i + 1]);
  }
}

function sendAnswer(id, value) {
  try {
    if (isMoved(value)) parent.send([id, value.value], { transfer: value.transfer });
    else parent.send([id, value]);
  } catch (err) {
    // The result could not be sent (a function in it, a transfer refused):
    // the task fails with that error instead; on a closed channel nobody
    // waits for either.
    if (parent.connected) parent.send([-Math.abs(id), serializeError(err)]);
  }
}

function runOneNameBatch(message) {
  const last = message.length - 1;
  const name = message[last] === null ? undefined : message[last];
  for (let i = 1; i < last; i += 2) runTask(message[i], message[i + 1], name);
}

function runBatch(message) {
  for (let i = 1; i < message.length; i += 3) {
    const name = message[i + 2];
    runTask(message[i], message[i + 1], name === null ? undefined : name);
  }
}

// An async task settled: it is no longer abortable, and its answer goes out,
// once: a thenable that is not a promise may call both of its callbacks, or
// one of them twice, or throw after calling one.
class Pending {
  constructor(id, controller) {
    this.id = id;
    this.controller = controller;
    this.settled = false;
  }

  resolved(value) {
    if (this.settled) return;
    this.settled = true;
    if (this.controller !== undefined) abortable.delete(this.id);
    reply(this.id, value);
  }

  rejected(err) {
    if (this.settled) return;
    this.settled = true;
    if (this.controller !== undefined) abortable.delete(this.id);
    fail(this.id, err);
  }
}

function noHandler(name) {
  const err = new Error(`the worker's module exports no handler named "${name}"`);
  err.code = 'ERR_PROCWIRE_POOL_NO_HANDLER';
  return err;
}

function runTask(id, task, name) {
  const fn = name !== undefined ? handlers.get(name) : defaultHandler;
  if (typeof fn !== 'function') {
    fail(id, noHandler(name !== undefined ? name : DEFAULT));
    return;
  }
  // Only a handler that declares a second parameter gets a signal: an
  // AbortController costs about 3 us on Node 20, ten times a small task.
  let controller;
  let result;
  let then;
  try {
    if (fn.length >= 2) {
      controller = new AbortController();
      result = fn(task, controller.signal);
    } else {
      result = fn(task);
    }
    // `then` is read once, as `await` reads it, and may throw (a revoked
    // proxy, a getter): the task fails with that, not the worker.
    then = result !== null && typeof result === 'object' ? result.then : undefined;
  } catch (err) {
    fail(id, err);
    return;
  }
  if (typeof then === 'function') {
    const pending = new Pending(id, controller);
    if (controller !== undefined) abortable.add(pending);
    try {
      then.call(result, (v) => pending.resolved(v), (e) => pending.rejected(e));
    } catch (err) {
      // A `then` that throws rejects, as it would under `await`.
      pending.rejected(err);
    }
    return;
  }
  reply(id, result);
}

function onMessage(message) {
  if (typeof message === 'number') {
    const pending = abortable.get(message);
    if (pending !== undefined) {
      abortable.delete(message);
      const reason = new Error('the task was aborted by the pool');
      reason.name = 'AbortError';
      pending.controller.abort(reason);
    }
    return;
  }
  const first = message[0];
  if (first === ONE_NAME) runOneNameBatch(message);
  else if (first === BATCH) runBatch(message);
  else runTask(message[0], message[1], message.length > 2 ? message[2] : undefined);
}

// Handlers from what the module exports: a function is the default
// handler; an object's function properties are named handlers (its
// `default`, or an ES module's default export, is the default one).
function collect(exported) {
  if (typeof exported === 'function') defaultHandler = exported;
  else if (exported === null || typeof exported !== 'object') return;
  for (const key of Object.keys(exported)) {
    const value = exported[key];
    if (typeof value === 'function') handlers.set(key, value);
  }
  // `export default { a, b }` or module.exports = { default: { ... } }.
  const inner = exported.default;
  if (typeof inner === 'function' && defaultHandler === null) defaultHandler = inner;
  else if (inner !== null && typeof inner === 'object') {
    for (const key of Object.keys(inner)) {
      if (typeof inner[key] === 'function' && !handlers.has(key)) handlers.set(key, inner[key]);
    }
  }
}

async function load(file) {
  if (/\.mjs$/i.test(file)) return import(url.pathToFileURL(file).href);
  try {
    return require(file);
  } catch (err) {
    // An ES module in a .js file (package "type": "module"), or one with
    // top-level await that require() cannot load on this Node line.
    if (err && (err.code === 'ERR_REQUIRE_ESM' || err.code === 'ERR_REQUIRE_ASYNC_MODULE')) {
      return import(url.pathToFileURL(file).href);
    }
    throw err;
  }
}

async function main() {
  // From the start: a module that fails to load, or loads slowly while the
  // pool lets the worker go, must not keep it running either.
  if (parent.connected) parent.once('close', leaveSoon);
  else leaveSoon();
  const file = path.resolve(process.argv[2]);
  let exported;
  try {
    exported = await load(file);
    collect(exported);
    if (defaultHandler === null && handlers.size === 0) {
      throw new TypeError(`${file} exports no function: export one (module.exports = fn) or an object of named functions`);
    }
  } catch (err) {
    tell({ loadError: serializeError(err) });
    parent.close();
    return;
  }
  if (defaultHandler !== null) handlers.set(DEFAULT, defaultHandler);
  // Ahead of the channel's own exit flush, which writes what is staged.
  process.prependOnceListener('exit', flushAnswers);
  parent.on('message', onMessage);
  tell('ready');
}

// The channel closed: the pool let this worker go, or its process is gone
// (killed, so it could not kill its workers). A module that keeps the worker
// alive (a server, a timer) would keep it running for nobody, so it exits by
// itself. It waits twice the pool's own grace period (5 s, then SIGKILL):
// while the pool lives, its kill is the one end of such a worker, and the
// exit its tasks are rejected with does not depend on which timer ran first.
const ORPHAN_EXIT_MS = 10_000;
function leaveSoon() {
  setTimeout(() => process.exit(), ORPHAN_EXIT_MS).unref();
}

// The pool may have let this worker go while it loaded (close(), destroy()):
// then there is nobody to tell, and the worker just ends.
function tell(message) {
  try {
    parent.send(message);
  } catch {
    parent.close();
  }
}

if (parent === null) {
  process.stderr.write('procwire pool worker: not started by procwire.Pool\n');
  process.exitCode = 1;
} else {
  main();
}
