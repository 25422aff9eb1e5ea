'use strict';
// One pool worker: a procwire child running lib/pool/worker-runtime.js over
// the user's module, the tasks it holds (id -> task), its counters, the
// tail of its stderr, and its end. It tells its pool what happens through
// the pool's symbol-named methods (./symbols.js); it decides nothing about
// scheduling.

const path = require('path');
const { fork } = require('../fork');
const { makeError } = require('../errors');
const { TaskOutbox, BATCH, closedError } = require('./outbox');
const { kReady, kResult, kExit, kUnsent, kHangup, kStarted } = require('./symbols');
const { TaskTable } = require('./task-table');

const RUNTIME = path.join(__dirname, 'worker-runtime.js');
const STDERR_TAIL = 4096;
// After its exit, how long a worker's stderr may stay open (a grandchild
// holding it) before its end is reported with the tail read so far.
const STDERR_LINGER_MS = 500;
// A retired worker whose module keeps it alive after its channel closed
// gets this long before SIGKILL.
const RETIRE_KILL_MS = 5000;
// A worker that closed its channel before it was ready (its module failed
// to load, and said why) gets this long to exit by itself before SIGKILL.
const UNSTARTED_KILL_MS = 500;

// Every worker of this process's pools that has not exited. When the
// process exits they are killed, as a thread pool's threads end with it: a
// worker whose module holds a handle open (an interval, a connection) would
// otherwise outlive it for ever, above all one that was let go, whose
// channel is closed already, so that it cannot learn that its parent is gone.
const unexited = new Set();
let killAtExit = false;
function killUnexited() {
  for (const slot of unexited) slot.child.kill('SIGKILL');
}

const STARTING = 'starting';
const READY = 'ready';
const RETIRING = 'retiring';
const DEAD = 'dead';

class WorkerSlot {
  constructor(pool, spawn) {
    this.pool = pool;
    this.state = STARTING;
    this.wasReady = false;   // it said 'ready' (its state may have moved on since)
    this.tasks = new TaskTable();  // id -> task sent and not yet answered
    this.load = 0;           // tasks.size, read on every dispatch
    this.stopping = 0;       // of them, aborted ones it has not yet let go
    this.completed = 0;
    this.busySince = 0;
    this.busyMs = 0;
    this.idleSince = 0;
    this.loadError = null;   // what the module threw while loading
    this.killedFor = null;   // why the pool killed it, if it did
    this.stderr = '';
    this.exit = null;        // { exitCode, signalCode } once it exited
    this.refed = true;
    this.killTimer = null;
    this.lingerTimer = null;
    this.hungUp = false;     // it closed its channel while ready
    this.stderrClosed = false;
    this.child = fork(RUNTIME, spawn.args, {
      child: 'procwire',
      serialization: spawn.serialization,
      execArgv: spawn.execArgv,
      execPath: spawn.execPath,
      env: spawn.env,
      stdio: ['inherit', 'inherit', 'pipe', 'ipc'],
    });
    this.pid = this.child.pid;
    if (this.pid === undefined) {
      // spawn() failed without throwing (EAGAIN under ulimit -u, ENOENT): Node
      // reports that with an 'error' event and never an 'exit', so the pool
      // would wait for this worker for ever. It is a failed fork instead.
      this.child.on('error', () => {});
      if (this.child.connected) this.child.disconnect();
      throw makeError('ERR_PROCWIRE_POOL_WORKER_START', 'spawn() failed (see the ChildProcess error event: EAGAIN, ENOENT, ...)');
    }
    unexited.add(this);
    if (!killAtExit) {
      killAtExit = true;
      process.on('exit', killUnexited);
    }
    this.channel = this.child.channel;
    this.outbox = new TaskOutbox(this.channel, (task) => this.sendOne(task), (tasks, err) => this.unsent(tasks, err),
      (tasks) => this.sent(tasks));
    this.child.on('message', (m) => this.onMessage(m));
    this.child.on('error', () => { /* a failed kill or spawn: its exit reports it */ });
    this.child.on('disconnect', () => this.onDisconnect());
    this.child.stderr.on('data', (chunk) => this.onStderr(chunk));
    this.child.stderr.once('close', () => {
      this.stderrClosed = true;
      if (this.exit !== null) this.ended();
    });
    this.child.once('exit', (exitCode, signal) => this.onExit(exitCode, signal));
  }

  onMessage(m) {
    if (Array.isArray(m)) {
      if (m[0] === BATCH) {
        for (let i = 1; i < m.length; i += 2) this.settle(m[i], m[i + 1]);
      } else {
        this.settle(m[0], m[1]);
      }
      return;
    }
    if (m === 'ready' && this.state === STARTING) {
      this.state = READY;
      this.wasReady = true;
      this.pool[kReady](this);
    } else if (m !== null && typeof m === 'object' && m.loadError !== undefined) {
      this.loadError = m.loadError;
    }
  }

  // One answer: a positive id returned its value, a negative one threw.
  settle(id, value) {
    const ok = id > 0;
    if (!ok) id = -id;
    const task = this.tasks.take(id);
    if (task === undefined) return;
    this.load--;
    this.pool[kResult](this, task, ok, value);
  }

  // The channel closed. At our retire() or kill that is expected; a ready
  // worker that hung up by itself (procwire.parent.close(), or a crash whose
  // exit is not reported yet) can take no task and answer none, however
  // long it runs on: it is retired like one the pool let go, so it is killed
  // if it lingers, and its pool stops counting it and forks a replacement.
  // A worker still starting is left to its exit, which reports the failure.
  onDisconnect() {
    if (this.exit !== null) return;
    if (this.state === STARTING) {
      // A start failure, reported at its exit: which a module holding a
      // handle open (an interval, a connection made before it threw) would
      // put off for ever, leaving the tasks waiting for it.
      this.killTimer = setTimeout(() => this.kill('unstarted'), UNSTARTED_KILL_MS);
      this.killTimer.unref();
      return;
    }
    if (this.state !== READY) return;
    this.hungUp = true;
    this.retire();
    this.pool[kHangup](this);
  }

  // The worker's stderr goes on to ours, as an inherited one would, and its
  // last few KiB are kept for the error that reports its death.
  onStderr(chunk) {
    process.stderr.write(chunk);
    const text = this.stderr + chunk.toString('utf8');
    this.stderr = text.length > STDERR_TAIL ? text.slice(-STDERR_TAIL) : text;
  }

  // Takes a task: it counts as this worker's from now, and goes out with
  // the others given in this tick (./outbox.js). A task with a transfer goes
  // at once, after them, since its buffers are handed over by its own send.
  send(task) {
    this.tasks.add(task);
    this.load++;
    if (task.transfer === undefined) {
      this.outbox.add(task);
    } else {
      this.outbox.flush();
      this.sendOne(task);
    }
  }

  sendOne(task) {
    const closed = closedError(this.channel);
    if (closed !== null) {
      this.unsent([task], closed);
      return;
    }
    const message = task.name === undefined ? [task.id, task.task] : [task.id, task.task, task.name];
    try {
      if (task.transfer === undefined) this.channel.send(message);
      else this.channel.send(message, { transfer: task.transfer });
    } catch (err) {
      this.unsent([task], err);
      return;
    }
    this.pool[kStarted](task);
  }

  // Tasks the channel took, as one message.
  sent(tasks) {
    for (const task of tasks) this.pool[kStarted](task);
  }

  // A task cancelled in the tick it was given here, still in the outbox:
  // taken back unsent (whether it was there).
  takeBack(task) {
    if (!this.outbox.remove(task)) return false;
    this.tasks.delete(task.id);
    this.load--;
    return true;
  }

  // A task left this worker: with none left, its busy time ends at `at`.
  freedAt(at) {
    if (this.load !== 0) return;
    this.busyMs += at - this.busySince;
    this.idleSince = at;
  }

  // Tasks the channel refused are not this worker's any more: the pool
  // queues them again (a closed channel) or fails them (their own error).
  unsent(tasks, err) {
    for (const task of tasks) {
      if (this.tasks.get(task.id) === task) {
        this.tasks.delete(task.id);
        this.load--;
      }
    }
    this.pool[kUnsent](this, tasks, err);
  }

  // The pool is destroyed: the tasks given in this tick never go out, and
  // the pool settles them as not run.
  recallUnsent() {
    const tasks = this.outbox.take();
    if (tasks.length > 0) this.unsent(tasks, makeError('ERR_PROCWIRE_CHANNEL_CLOSED', 'the pool was destroyed'));
  }

  // Asks the worker to abort a running task (its handler's signal fires).
  // The task has gone out: one still in the outbox is taken back instead.
  abort(task) {
    if (this.state === DEAD || this.channel === null || !this.child.connected) return;
    try {
      this.channel.send(task.id);
    } catch {
      // The channel just closed: the exit that follows settles it.
    }
  }

  // Graceful end: the worker's channel closes and it exits by itself once
  // its module holds nothing else open; SIGKILL if it does not.
  retire() {
    if (this.state === DEAD || this.state === RETIRING) return;
    this.state = RETIRING;
    if (this.child.connected) this.child.disconnect();
    // A worker that hung up while starting has a shorter timer already.
    if (this.killTimer !== null) return;
    this.killTimer = setTimeout(() => this.kill('retire'), RETIRE_KILL_MS);
    this.killTimer.unref();
  }

  kill(reason) {
    if (this.exit !== null) return;
    if (this.killedFor === null) this.killedFor = reason;
    if (this.state !== DEAD) this.state = RETIRING;
    this.child.kill('SIGKILL');
  }

  // The end is reported once stderr is drained too, so the error carries
  // the worker's last words (ChildProcess's own 'close' never comes after
  // a disconnect() of ours, as in Node). A grandchild holding stderr open
  // must not hold the report back for ever.
  onExit(exitCode, signal) {
    unexited.delete(this);
    this.exit = { exitCode, signalCode: signal };
    if (this.killTimer !== null) clearTimeout(this.killTimer);
    if (this.stderrClosed) this.ended();
    else this.lingerTimer = setTimeout(() => this.ended(), STDERR_LINGER_MS);
  }

  ended() {
    if (this.state === DEAD) return;
    if (this.exit === null) this.exit = { exitCode: this.child.exitCode, signalCode: this.child.signalCode };
    if (this.lingerTimer !== null) clearTimeout(this.lingerTimer);
    if (this.killTimer !== null) clearTimeout(this.killTimer);
    const wasReady = this.wasReady;
    this.state = DEAD;
    this.load = 0;
    this.outbox.drop();
    this.pool[kExit](this, wasReady);
    this.tasks.clear();
    this.child.stderr.destroy();
  }

  // While the pool has no task, its workers do not keep this process alive.
  setRef(on) {
    if (this.refed === on || this.state === DEAD) return;
    this.refed = on;
    const channel = this.child.channel;
    if (on) {
      this.child.ref();
      if (channel) channel.ref();
      this.child.stderr.ref();
    } else {
      this.child.unref();
      if (channel) channel.unref();
      this.child.stderr.unref();
    }
  }

  describe() {
    return { pid: this.pid, state: this.state, running: this.load, completed: this.completed };
  }
}

module.exports = { WorkerSlot, STARTING, READY, RETIRING, DEAD };
