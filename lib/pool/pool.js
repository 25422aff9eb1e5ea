'use strict';
// procwire.Pool: a pool of procwire child processes running one module's
// handlers, with piscina's API (run, close, destroy, 'drain', stats).
//
// The pool holds the state (its phase, the live workers) and the public
// methods; the Scheduler picks a worker or queues, a WorkerSlot runs one
// process, PoolStats keeps the counters and timings. A task is one small
// object from run() to its settlement: no closure, timer or listener is
// made for it unless it asked for a timeout or a signal.

const { EventEmitter } = require('events');
const { makeError, invalidArg } = require('../errors');
const { batchNow } = require('./histogram');
const { PoolStats } = require('./pool-stats');
const { Scheduler } = require('./scheduler');
const { WorkerSlot, READY, STARTING } = require('./worker-slot');
const { poolSettings, runSettings } = require('./options');
const { move, isMoved } = require('./move');
const { remoteError, exitedError, startError } = require('./task-errors');
const { kReady, kResult, kExit, kCancel, kUnsent, kHangup } = require('./symbols');
const { Task, QUEUED, RUNNING, CANCELLED, DONE, isLive, promiseOf, onTimeout, onGraceOver } = require('./task');

// Workers that die before answering anything, one after another, before
// the pool stops replacing them until the next run().
const MAX_CRASH_STREAK = 5;
// How long an idle pool's workers still keep the process alive.
const UNREF_AFTER_MS = 50;

const now = batchNow;

class Pool extends EventEmitter {
  #settings;
  #scheduler;
  #live = new Set();     // every worker not yet dead
  #leaving = new Set();  // live workers let go (idle, hung up) that have not exited yet
  #starting = 0;
  #phase = 'open';       // 'open' -> 'closing' -> 'closed'
  #nextId = 1;
  #active = 0;           // tasks queued or held by a worker
  #startFailed = null;   // the last start failure; no respawn until run()
  #crashStreak = 0;
  #idleTimer = null;
  #unrefTimer = null;
  #refed = true;
  #closed = null;        // { promise, resolve } once close()/destroy() began
  #stats = new PoolStats();
  #pumping = false;      // #pump is handing out queued tasks
  #drainOwed = false;    // the pool was found full: 'drain' comes when it is not

  constructor(options) {
    super();
    this.#settings = poolSettings(options);
    this.#scheduler = new Scheduler(this.#settings.concurrentTasksPerWorker, isLive);
    for (let i = 0; i < this.#settings.minWorkers; i++) this.#spawn();
    this.#refAll(false);
  }

  // Piscina's static move() and the same on the instance.
  static move(value, transfer) { return move(value, transfer); }

  // The settings, without the pool's own (how workers are forked, the name tasks are sent with).
  get options() {
    const options = { ...this.#settings };
    delete options.spawn;
    delete options.taskName;
    return options;
  }
  get queueSize() { return this.#scheduler.queue.size; }
  get completed() { return this.#stats.completed; }
  get needsDrain() {
    const full = this.#scheduler.queue.size >= this.#queueLimit() && this.#scheduler.pick() === null;
    if (full) this.#drainOwed = true;
    return full;
  }
  get workers() { return [...this.#live].map((slot) => slot.describe()); }

  run(task, options) {
    if (this.#phase !== 'open') {
      return Promise.reject(makeError('ERR_PROCWIRE_POOL_CLOSED', 'the pool is closed: run() takes no new task'));
    }
    let name = this.#settings.taskName;
    let signal;
    let transfer;
    let timeout = this.#settings.timeout;
    if (options !== undefined) {
      try {
        ({ name, signal, transfer, timeout } = runSettings(options, this.#settings));
      } catch (err) {
        return Promise.reject(err);
      }
      if (signal !== undefined && signal.aborted) {
        return Promise.reject(makeError('ERR_PROCWIRE_TASK_ABORTED', 'the task was aborted before it ran', signal.reason));
      }
    }
    if (task !== null && typeof task === 'object' && isMoved(task)) {
      transfer = transfer === undefined ? task.transfer : [...transfer, ...task.transfer];
      task = task.value;
    }
    const queue = this.#scheduler.queue;
    const slot = queue.size === 0 ? this.#scheduler.pick() : null;
    if (slot === null && queue.size >= this.#queueLimit()) {
      this.#drainOwed = true;
      return Promise.reject(makeError('ERR_PROCWIRE_POOL_QUEUE_FULL', this.#settings.maxQueue === 0
        ? 'every worker is busy and the pool has no queue (maxQueue 0)'
        : `the pool's queue holds maxQueue (${this.#settings.maxQueue}) tasks already`));
    }
    const t = new Task(this, this.#nextId++, task, name, transfer);
    const promise = promiseOf(t);
    if (signal !== undefined) {
      t.signal = signal;
      signal.addEventListener('abort', t, { once: true });
    }
    if (timeout > 0) t.timer = setTimeout(onTimeout, timeout, t);
    t.enqueuedAt = now();
    if (this.#active++ === 0 && !this.#refed) this.#refAll(true);
    if (this.#startFailed !== null) {
      // The last worker could not start: try once more for this task.
      this.#startFailed = null;
      this.#crashStreak = 0;
      this.#ensureWorkers();
    }
    if (slot !== null) this.#dispatch(slot, t);
    else this.#enqueue(t);
    return promise;
  }

  // Tasks may wait beyond maxQueue for the room of the workers not ready
  // yet (starting, or to be forked up to maxWorkers), as piscina counts its
  // starting workers' room: a cold pool with maxQueue 0 still takes tasks.
  #queueLimit() {
    const { maxQueue, maxWorkers, concurrentTasksPerWorker } = this.#settings;
    return maxQueue + Math.max(0, maxWorkers - this.#scheduler.slots.length) * concurrentTasksPerWorker;
  }

  // 'drain': the queue became empty, or the pool has room again after
  // needsDrain or a refusal said it had none.
  #drained() {
    this.#drainOwed = false;
    this.emit('drain');
  }

  #enqueue(t) {
    this.#scheduler.queue.push(t);
    this.#grow();
  }

  // One more worker when tasks wait, none is starting, and there is room.
  #grow() {
    if (this.#phase === 'closed' || this.#startFailed !== null || this.#starting > 0) return;
    if (this.#workerCount() < this.#settings.maxWorkers && this.#scheduler.queue.size > 0) this.#spawn();
  }

  // Forks up to minWorkers unless workers keep dying (or hanging up) before
  // finishing anything; tasks that wait get a worker either way.
  #ensureWorkers() {
    if (this.#phase === 'closed' || this.#startFailed !== null) return;
    if (this.#phase === 'open' && this.#crashStreak < MAX_CRASH_STREAK) {
      while (this.#workerCount() < this.#settings.minWorkers) this.#spawn();
    }
    if (this.#scheduler.queue.size > 0) this.#grow();
  }

  // The workers the pool counts against minWorkers and maxWorkers: not the
  // ones it let go, which may take up to RETIRE_KILL_MS to exit and must not
  // hold a replacement back meanwhile.
  #workerCount() {
    return this.#live.size - this.#leaving.size;
  }

  #spawn() {
    let slot;
    try {
      slot = new WorkerSlot(this, this.#settings.spawn);
    } catch (err) {
      // fork() itself failed (no memory, too many processes): the tasks
      // that wait learn it now rather than waiting for a worker.
      const failed = makeError('ERR_PROCWIRE_POOL_WORKER_START', `could not fork a pool worker: ${err.message}`, err);
      this.#startFailed = failed;
      process.nextTick(() => this.#failQueued(failed));
      return;
    }
    this.#live.add(slot);
    this.#starting++;
    if (!this.#refed) slot.setRef(false);
  }

  #dispatch(slot, t) {
    t.state = RUNNING;
    t.slot = slot;
    const at = now();
    t.startedAt = at;
    this.#stats.waitTime.record(at - t.enqueuedAt);
    if (slot.load === 0) slot.busySince = at;
    slot.send(t);
  }

  // Tasks a worker's channel did not take were not run. A closed channel
  // (the worker is dying) puts them back first in line, in their order;
  // anything else (an unserializable task, a refused transfer) is the
  // task's own error. A task cancelled meanwhile was rejected already.
  [kUnsent](slot, tasks, err) {
    const closed = err !== null && typeof err === 'object' && err.code === 'ERR_PROCWIRE_CHANNEL_CLOSED';
    if (closed) this.#scheduler.removeSlot(slot);
    for (let i = tasks.length - 1; i >= 0; i--) {
      const t = tasks[i];
      if (t.state === RUNNING && closed && this.#phase !== 'closed') {
        t.state = QUEUED;
        t.slot = null;
        this.#scheduler.queue.unshift(t);
        continue;
      }
      const running = t.state === RUNNING;
      if (t.state === CANCELLED) slot.stopping--;
      this.#finish(t);
      if (running && closed) {
        this.#stats.cancelled++;
        t.reject(makeError('ERR_PROCWIRE_POOL_CLOSED', 'the pool was destroyed before the task ran'));
      } else if (running) {
        // It ran nowhere, but it failed: stats() counts it with the failed.
        this.#stats.failed++;
        t.reject(err);
      }
      this.#taskGone();
    }
    // Another worker with room takes them now, not at this one's exit (a
    // #pump running takes them itself: this is its own dispatch).
    if (closed && this.#phase !== 'closed' && !this.#pumping) this.#pump();
  }

  // Hands queued tasks to workers with room, oldest first.
  #pump() {
    const scheduler = this.#scheduler;
    const queue = scheduler.queue;
    if (queue.size === 0) return;
    let slot;
    this.#pumping = true;
    try {
      while (queue.size > 0 && (slot = scheduler.pick()) !== null) {
        const t = queue.shift();
        if (t === undefined) break;
        this.#dispatch(slot, t);
      }
    } finally {
      this.#pumping = false;
    }
    if (queue.size === 0) this.#drained();
    else this.#grow();
  }

  // The task's timer and listener go; it is no longer anyone's to cancel.
  #finish(t) {
    if (t.timer !== null) {
      clearTimeout(t.timer);
      t.timer = null;
    }
    if (t.signal !== undefined) {
      t.signal.removeEventListener('abort', t);
      t.signal = undefined;
    }
    t.state = DONE;
  }

  // A task left the pool entirely (settled and out of its worker).
  #taskGone() {
    if (--this.#active === 0) {
      if (this.#phase === 'open') this.#idleSoon();
      if (this.#phase === 'closing') this.#shutdown();
    }
  }

  [kReady](slot) {
    this.#starting--;
    if (this.#phase === 'closed') return;
    this.#scheduler.addSlot(slot);
    slot.idleSince = now();
    this.#pump();
    this.#armIdle();
    if (this.#drainOwed && !this.needsDrain) this.#drained();
  }

  // A ready worker closed its channel: it takes no more tasks (those it
  // holds settle at its exit), and a replacement keeps the pool's size.
  // It counts in the crash streak now, as an exit would (its own exit
  // then does not count it again), so a module whose workers hang up and
  // linger is not a fork loop either.
  [kHangup](slot) {
    if (this.#phase === 'closed') return;
    this.#scheduler.removeSlot(slot);
    this.#leaving.add(slot);
    this.#crashStreak = slot.completed === 0 ? this.#crashStreak + 1 : 0;
    this.#ensureWorkers();
  }

  [kResult](slot, t, ok, value) {
    const at = now();
    if (slot.load === 0) {
      slot.busyMs += at - slot.busySince;
      slot.idleSince = at;
    }
    if (this.#crashStreak !== 0) {
      // A worker answered: the streak is over, and workers it stopped the
      // pool from replacing are forked again to keep minWorkers.
      this.#crashStreak = 0;
      this.#ensureWorkers();
    }
    if (t.state === RUNNING) {
      this.#stats.runTime.record(at - t.startedAt);
      slot.completed++;
      this.#finish(t);
      if (ok) {
        this.#stats.completed++;
        t.resolve(value);
      } else {
        this.#stats.failed++;
        t.reject(remoteError(value, t));
      }
    } else {
      // Cancelled while running: it was rejected already; its grace ends.
      slot.stopping--;
      this.#finish(t);
    }
    if (this.#scheduler.queue.size > 0) this.#pump();
    this.#taskGone();
    if (slot.load === 0 && this.#idleTimer === null) this.#armIdle();
    if (this.#drainOwed && !this.needsDrain) this.#drained();
  }

  [kCancel](t, code, reason) {
    if (t.state === QUEUED) {
      this.#finish(t);
      this.#scheduler.queue.removed();
      this.#stats.cancelled++;
      t.reject(this.#cancelError(code, reason, false));
      if (this.#scheduler.queue.size === 0) this.#drained();
      this.#taskGone();
      return;
    }
    if (t.state !== RUNNING) return;
    // Rejected now; the worker is asked to stop, and killed if it has not
    // answered within the grace period.
    const slot = t.slot;
    this.#finish(t);
    t.state = CANCELLED;
    slot.stopping++;
    this.#stats.cancelled++;
    t.reject(this.#cancelError(code, reason, true));
    slot.abort(t);
    t.timer = setTimeout(onGraceOver, this.#settings.abortGracePeriod, t);
    t.timer.unref();
  }

  #cancelError(code, reason, running) {
    const where = running ? 'while it ran (its worker was asked to stop)' : 'while it waited in the queue';
    const what = code === 'ERR_PROCWIRE_TASK_TIMEOUT' ? 'timed out' : 'was aborted';
    return makeError(code, `the task ${what} ${where}`, reason);
  }

  [kExit](slot, wasReady) {
    this.#live.delete(slot);
    this.#leaving.delete(slot);
    this.#scheduler.removeSlot(slot);
    this.#stats.workerGone(slot);
    if (!wasReady) this.#starting--;
    for (const t of slot.tasks.values()) {
      const state = t.state;
      this.#finish(t);
      if (state === RUNNING) {
        this.#stats.failed++;
        t.reject(this.#phase === 'closed' ? makeError('ERR_PROCWIRE_POOL_CLOSED', 'the pool was destroyed while the task ran')
          : exitedError(slot));
      }
      this.#active--;
    }
    if (!wasReady && this.#phase !== 'closed') {
      const err = startError(slot);
      // Tasks wait for a worker that cannot start: they get its error, and
      // no new worker is forked until the next run().
      if (this.#scheduler.slots.length === 0 && this.#starting === 0) {
        this.#startFailed = err;
        this.#failQueued(err);
      }
    } else if (this.#phase !== 'closed' && !slot.hungUp && slot.killedFor !== 'retire' && slot.killedFor !== 'idle') {
      // A replacement. Workers that die before finishing anything, again
      // and again, are not replaced to keep minWorkers up (that would be a
      // fork loop); tasks still waiting always get one.
      this.#crashStreak = slot.completed === 0 ? this.#crashStreak + 1 : 0;
      this.#ensureWorkers();
    }
    if (this.#active === 0 && this.#phase === 'open') this.#idleSoon();
    if (this.#phase === 'closing' && this.#active === 0) this.#shutdown();
    if (this.#phase !== 'open' && this.#live.size === 0 && this.#closed !== null) this.#closed.resolve();
    else if (this.#phase === 'open' && this.#scheduler.queue.size > 0) this.#pump();
  }

  #failQueued(err) {
    const tasks = this.#scheduler.queue.takeAll();
    for (const t of tasks) {
      this.#finish(t);
      this.#stats.failed++;
      t.reject(err);
    }
    this.#active -= tasks.length;
    if (tasks.length > 0) this.#drained();
    if (this.#active === 0) {
      if (this.#phase === 'open') this.#idleSoon();
      if (this.#phase === 'closing') this.#shutdown();
    }
  }

  // Workers above minWorkers that stayed idle for idleTimeout exit.
  #armIdle() {
    if (this.#idleTimer !== null || this.#phase !== 'open') return;
    if (this.#workerCount() <= this.#settings.minWorkers) return;
    this.#idleTimer = setTimeout(() => this.#sweepIdle(), Math.max(1, this.#settings.idleTimeout));
    this.#idleTimer.unref();
  }

  #sweepIdle() {
    this.#idleTimer = null;
    if (this.#phase !== 'open') return;
    const limit = now() - this.#settings.idleTimeout;
    let extra = this.#workerCount() - this.#settings.minWorkers;
    for (const slot of [...this.#scheduler.slots]) {
      if (extra <= 0) break;
      if (slot.load === 0 && slot.idleSince <= limit) {
        this.#scheduler.removeSlot(slot);
        slot.killedFor = 'idle';
        this.#leaving.add(slot);
        slot.retire();
        extra--;
      }
    }
    if (this.#workerCount() > this.#settings.minWorkers) this.#armIdle();
  }

  #refAll(on) {
    this.#refed = on;
    for (const slot of this.#live) slot.setRef(on);
  }

  // The pool has no task: its workers stop keeping this process alive
  // after a short while, not at once, so back-to-back single tasks do not
  // pay six ref()/unref() calls each. The one timer is re-armed, not made.
  #idleSoon() {
    if (!this.#refed) return;
    if (this.#unrefTimer === null) {
      this.#unrefTimer = setTimeout(() => {
        if (this.#active === 0 && this.#phase === 'open') this.#refAll(false);
      }, UNREF_AFTER_MS);
      this.#unrefTimer.unref();
    } else {
      this.#unrefTimer.refresh();
    }
  }

  // close(): no new task; what is queued and running finishes (with
  // { force: true }, as piscina's, what is queued is rejected instead); then
  // every worker is told to exit. Resolves once all have.
  close(options) {
    let force = false;
    if (options !== undefined) {
      if (options === null || typeof options !== 'object' || (options.force !== undefined && typeof options.force !== 'boolean')) {
        return Promise.reject(invalidArg('close(options): options must be an object, and its force a boolean'));
      }
      force = options.force === true;
    }
    if (this.#closed === null) {
      this.#beginEnd();
      this.#phase = 'closing';
      // Until every worker has exited, they keep this process alive, so
      // code after `await pool.close()` runs.
      this.#refAll(true);
    }
    if (this.#phase !== 'closing') return this.#closed.promise;
    if (force) this.#takeBackQueued('the pool was closed before the task ran');
    if (this.#active === 0) this.#shutdown();
    return this.#closed.promise;
  }

  // Queued tasks leave without running: rejected, counted as cancelled.
  #takeBackQueued(why) {
    const queued = this.#scheduler.queue.takeAll();
    for (const t of queued) {
      this.#finish(t);
      this.#stats.cancelled++;
      t.reject(makeError('ERR_PROCWIRE_POOL_CLOSED', why));
    }
    this.#active -= queued.length;
  }

  // destroy(): every queued and running task is rejected
  // (ERR_PROCWIRE_POOL_CLOSED) and the workers are killed.
  destroy() {
    if (this.#closed === null) this.#beginEnd();
    if (this.#phase === 'closed') return this.#closed.promise;
    this.#phase = 'closed';
    this.#takeBackQueued('the pool was destroyed before the task ran');
    this.#refAll(true);
    for (const slot of [...this.#live]) {
      slot.recallUnsent();
      slot.kill('destroy');
    }
    if (this.#live.size === 0) this.#closed.resolve();
    return this.#closed.promise;
  }

  #beginEnd() {
    let resolve;
    const promise = new Promise((r) => { resolve = r; });
    this.#closed = { promise, resolve };
    if (this.#idleTimer !== null) {
      clearTimeout(this.#idleTimer);
      this.#idleTimer = null;
    }
    if (this.#unrefTimer !== null) clearTimeout(this.#unrefTimer);
  }

  #shutdown() {
    this.#phase = 'closed';
    for (const slot of [...this.#live]) {
      slot.killedFor = 'retire';
      slot.retire();
    }
    if (this.#live.size === 0) this.#closed.resolve();
  }

  stats() {
    return this.#stats.summary(this.#live, this.#scheduler.queue.size, this.workers, this.#settings.maxWorkers);
  }
}

module.exports = { Pool, READY, STARTING };
