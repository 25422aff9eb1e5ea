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
const { makeError } = require('../errors');
const { batchNow, batchReading } = require('./histogram');
const { PoolStats } = require('./pool-stats');
const { Scheduler } = require('./scheduler');
const { WorkerSlot, READY, STARTING } = require('./worker-slot');
const { poolSettings, runSettings, closeSettings } = require('./options');
const { move, isMoved } = require('./move');
const { CrashStreak } = require('./crash-streak');
const { WorkerRefs } = require('./worker-refs');
const { remoteError, exitedError, startError, cancelError } = require('./task-errors');
const { kReady, kResult, kExit, kCancel, kUnsent, kHangup, kStarted } = require('./symbols');
const { Task, QUEUED, RUNNING, CANCELLED, DONE, isLive, promiseOf, onTimeout, onGraceOver } = require('./task');

const now = batchNow;
// After fork() itself failed, how long before the pool tries again.
const FORK_RETRY_MS = 1000;

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
  #streak = new CrashStreak(() => this.#ensureWorkers());
  #idleTimer = null;
  #refs = new WorkerRefs(this.#live, () => this.#active === 0 && this.#phase === 'open');
  #closed = null;        // { promise, resolve } once close()/destroy() began
  #stats = new PoolStats();
  #pumping = false;      // #pump is handing out queued tasks
  #drainOwed = false;    // the pool was found full: 'drain' comes when it is not

  constructor(options) {
    super();
    this.#settings = poolSettings(options);
    this.#scheduler = new Scheduler(this.#settings.concurrentTasksPerWorker, isLive);
    for (let i = 0; i < this.#settings.minWorkers && this.#spawn(); i++);
    this.#refs.set(false);
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
    t.enqueued = batchReading();
    if (this.#active++ === 0 && !this.#refs.refed) this.#refs.set(true);
    if (this.#startFailed !== null) {
      // The last worker could not start: try once more for this task.
      this.#startFailed = null;
      this.#streak.reset();
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

  // One more worker when tasks wait, none is starting, and there is room;
  // after a streak of failed starts, only if no worker is ready to take them.
  #grow() {
    if (this.#phase === 'closed' || this.#startFailed !== null || this.#starting > 0) return;
    if (this.#streak.startsPaused && this.#scheduler.slots.length > 0) return;
    if (this.#workerCount() < this.#settings.maxWorkers && this.#scheduler.queue.size > 0) this.#spawn();
  }

  // Forks up to minWorkers unless workers keep dying (or hanging up) before
  // finishing anything; tasks that wait get a worker either way.
  #ensureWorkers() {
    if (this.#phase === 'closed' || this.#startFailed !== null) return;
    if (this.#phase === 'open' && !this.#streak.stopped) {
      while (this.#workerCount() < this.#settings.minWorkers && this.#spawn());
    }
    if (this.#scheduler.queue.size > 0) this.#grow();
  }

  // The workers the pool counts against minWorkers and maxWorkers: not the
  // ones it let go, which may take up to RETIRE_KILL_MS to exit and must not
  // hold a replacement back meanwhile.
  #workerCount() {
    return this.#live.size - this.#leaving.size;
  }

  // Forks a worker; false when fork() itself failed.
  #spawn() {
    let slot;
    try {
      slot = new WorkerSlot(this, this.#settings.spawn);
    } catch (err) {
      // fork() itself failed (no memory, too many processes). With a ready
      // worker the tasks go on there, and the pool tries again a little
      // later (./crash-streak.js bounds how often); without one, the tasks
      // that wait learn it now.
      if (this.#scheduler.slots.length > 0) {
        this.#streak.retryIn(Math.max(FORK_RETRY_MS, this.#streak.startFailed()));
        return false;
      }
      const failed = makeError('ERR_PROCWIRE_POOL_WORKER_START', `could not fork a pool worker: ${err.message}`, err);
      this.#startFailed = failed;
      process.nextTick(() => this.#failQueued(failed));
      return false;
    }
    this.#live.add(slot);
    this.#starting++;
    this.#refs.adopt(slot);
    return true;
  }

  #dispatch(slot, t) {
    t.state = RUNNING;
    t.slot = slot;
    const reading = batchReading();
    t.started = reading;
    if (slot.load === 0) slot.busySince = reading.at;
    slot.send(t);
  }

  // The task was written to its worker's channel: its wait is over. Counted
  // here, not at dispatch, so a task queued again (its worker's channel
  // closed before it went out) counts once, from its last dispatch.
  [kStarted](t) {
    this.#stats.waitTime.record(t.started.at - t.enqueued.at);
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
      if (this.#phase === 'open') this.#refs.idleSoon();
      if (this.#phase === 'closing') this.#shutdown();
    }
  }

  [kReady](slot) {
    this.#starting--;
    if (this.#phase === 'closed') return;
    if (this.#streak.started()) this.#ensureWorkers();
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
    this.#streak.ended(slot);
    this.#ensureWorkers();
  }

  [kResult](slot, t, ok, value) {
    const at = now();
    slot.freedAt(at);
    // A worker answered: a crash streak is over, and workers it stopped
    // the pool from replacing are forked again to keep minWorkers.
    if (this.#streak.answered()) this.#ensureWorkers();
    if (t.state === RUNNING) {
      this.#stats.runTime.record(at - t.started.at);
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
      t.reject(cancelError(code, reason, 'queued'));
      if (this.#scheduler.queue.size === 0) this.#drained();
      this.#taskGone();
      return;
    }
    if (t.state !== RUNNING) return;
    const slot = t.slot;
    this.#finish(t);
    this.#stats.cancelled++;
    if (slot.takeBack(t)) {
      // Aborted in the tick it was given to its worker: it had not gone
      // out yet, and never will, so the worker neither runs it nor is told.
      // (A timeout cannot come this early: the tick's tasks go out at its
      // microtask checkpoint, before any timer runs.)
      t.reject(cancelError(code, reason, 'unsent'));
      slot.freedAt(now());
      if (this.#scheduler.queue.size > 0) this.#pump();
      this.#taskGone();
      if (this.#drainOwed && !this.needsDrain) this.#drained();
      return;
    }
    // Rejected now; the worker is asked to stop, and killed if it has not
    // answered within the grace period.
    t.state = CANCELLED;
    slot.stopping++;
    t.reject(cancelError(code, reason, 'running'));
    slot.abort(t);
    t.timer = setTimeout(onGraceOver, this.#settings.abortGracePeriod, t);
    t.timer.unref();
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
      if (this.#scheduler.slots.length > 0 || this.#starting > 0) {
        // Another worker is ready, or may still be: this start failed alone
        // (a fork or a load that fails now and then). It is replaced, and
        // counts in a streak of failed starts, so a module that fails at
        // every start is forked less and less often (./crash-streak.js).
        this.#streak.retryIn(this.#streak.startFailed());
      } else {
        // Tasks wait for a worker that cannot start: they get its error,
        // and no new worker is forked until the next run().
        const err = startError(slot);
        this.#startFailed = err;
        this.#failQueued(err);
      }
    } else if (this.#phase !== 'closed' && !slot.hungUp && slot.killedFor !== 'retire' && slot.killedFor !== 'idle') {
      // A replacement. Workers that die before finishing anything, again
      // and again, are not replaced to keep minWorkers up (that would be a
      // fork loop); tasks still waiting always get one.
      this.#streak.ended(slot);
      this.#ensureWorkers();
    }
    if (this.#active === 0 && this.#phase === 'open') this.#refs.idleSoon();
    if (this.#phase === 'closing' && this.#active === 0) this.#shutdown();
    if (this.#phase !== 'open' && this.#live.size === 0 && this.#closed !== null) this.#closed.resolve();
    else if (this.#phase === 'open' && this.#scheduler.queue.size > 0) this.#pump();
  }

  #failQueued(err) {
    if (this.#rejectQueued(() => err, false) > 0) this.#drained();
    if (this.#active === 0) {
      if (this.#phase === 'open') this.#refs.idleSoon();
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
    const { idleTimeout, minWorkers } = this.#settings;
    for (const slot of this.#scheduler.takeIdle(now() - idleTimeout, this.#workerCount() - minWorkers)) {
      slot.killedFor = 'idle';
      this.#leaving.add(slot);
      slot.retire();
    }
    if (this.#workerCount() > this.#settings.minWorkers) this.#armIdle();
  }

  // close(): no new task; what is queued and running finishes (with
  // { force: true }, as piscina's, what is queued is rejected instead); then
  // every worker is told to exit. Resolves once all have.
  close(options) {
    let force;
    try {
      force = closeSettings(options);
    } catch (err) {
      return Promise.reject(err);
    }
    if (this.#closed === null) {
      this.#beginEnd();
      this.#phase = 'closing';
      // Until every worker has exited, they keep this process alive, so
      // code after `await pool.close()` runs.
      this.#refs.set(true);
    }
    if (this.#phase !== 'closing') return this.#closed.promise;
    if (force) this.#rejectQueued(() => makeError('ERR_PROCWIRE_POOL_CLOSED', 'the pool was closed before the task ran'), true);
    if (this.#active === 0) this.#shutdown();
    return this.#closed.promise;
  }

  // Queued tasks leave without running, rejected with errorOf() and counted
  // as cancelled (taken back) or failed (no worker could start) -> how many.
  #rejectQueued(errorOf, cancelled) {
    const tasks = this.#scheduler.queue.takeAll();
    for (const t of tasks) {
      this.#finish(t);
      t.reject(errorOf());
    }
    if (cancelled) this.#stats.cancelled += tasks.length;
    else this.#stats.failed += tasks.length;
    this.#active -= tasks.length;
    return tasks.length;
  }

  // destroy(): every queued and running task is rejected
  // (ERR_PROCWIRE_POOL_CLOSED) and the workers are killed.
  destroy() {
    if (this.#closed === null) this.#beginEnd();
    if (this.#phase === 'closed') return this.#closed.promise;
    this.#phase = 'closed';
    this.#rejectQueued(() => makeError('ERR_PROCWIRE_POOL_CLOSED', 'the pool was destroyed before the task ran'), true);
    this.#refs.set(true);
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
    this.#streak.cancelRetry();
    this.#refs.stop();
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

  // `await using pool = new Pool(...)`: close() at the scope's end, as
  // piscina's pool does (queued and running tasks finish first).
  [Symbol.asyncDispose]() {
    return this.close();
  }
}

module.exports = { Pool, READY, STARTING };
