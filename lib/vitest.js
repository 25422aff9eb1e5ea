'use strict';
// procwire/vitest: a pool for Vitest 4's custom pool API. In vitest.config:
//
//   import { procwire } from 'procwire/vitest';
//   export default { test: { pool: procwire() } };
//
// It runs Vitest's own forks worker (dist/workers/forks.js, the one the
// default `forks` pool runs) in children forked through procwire.fork, so
// Vitest's messages between the main process and its workers take
// procwire's native channel, both ends; the rest (scheduling, maxWorkers,
// isolate, execArgv, env) is Vitest's. Vitest is not loaded from here: the
// pool gets everything it needs in createPoolWorker()'s options, so procwire
// never depends on Vitest (an optional peer).

const path = require('path');

// As Vitest's forks pool: a worker that does not end on SIGTERM is killed
// after this many ms.
const SIGKILL_AFTER_MS = 500;

// One Vitest worker: Vitest's PoolWorker contract (start, stop, send, on,
// off, deserialize) over one procwire child.
class ProcwirePoolWorker {
  constructor(options, name, childMode) {
    this.name = name;
    this.childMode = childMode;
    // Vitest may cache file reads for a worker that is a process of its own.
    this.cacheFs = true;
    this.execArgv = options.execArgv;
    this.env = options.env;
    this.entrypoint = path.resolve(options.distPath, 'workers', 'forks.js');
    this.stdout = options.project.vitest.logger.outputStream;
    this.stderr = options.project.vitest.logger.errorStream;
    this.child = null;
  }

  process() {
    if (this.child === null) throw new Error('procwire/vitest: the worker was stopped or never started');
    return this.child;
  }

  on(event, callback) {
    this.process().on(event, callback);
  }

  off(event, callback) {
    this.process().off(event, callback);
  }

  send(message) {
    this.process().send(message);
  }

  async start() {
    if (this.child !== null) return;
    const { fork } = require('./fork');
    this.child = fork(this.entrypoint, [], {
      env: this.env, execArgv: this.execArgv, stdio: 'pipe', serialization: 'advanced', child: this.childMode,
    });
    // The worker's output goes where Vitest's own workers' does; the logger's
    // streams outlive every worker, so they are not ended with it.
    this.child.stdout.pipe(this.stdout, { end: false });
    this.child.stderr.pipe(this.stderr, { end: false });
  }

  async stop() {
    const child = this.child;
    if (child === null) return;
    const exited = child.exitCode !== null || child.signalCode !== null
      ? Promise.resolve()
      : new Promise((resolve) => child.once('exit', resolve));
    const timer = setTimeout(() => child.kill('SIGKILL'), SIGKILL_AFTER_MS);
    child.kill();
    await exited;
    clearTimeout(timer);
    child.stdout.unpipe(this.stdout);
    child.stderr.unpipe(this.stderr);
    this.child = null;
  }

  deserialize(data) {
    return data;
  }
}

// The pool: `pool: procwire()`. Its name is what Vitest matches workers to
// tasks by ('procwire' unless options.name says otherwise). options.child
// is fork()'s: 'node' by default, a plain Node worker with only this end
// native, because with `isolate` (Vitest's default) every test file starts
// a worker, and a native child's preload (the addon and the channel) cost
// 300 files about a tenth more CPU than the messages saved; 'native' serves
// the worker's end natively too.
function procwire(options = {}) {
  const given = options !== null && typeof options === 'object' ? options : {};
  const name = typeof given.name === 'string' ? given.name : 'procwire';
  const childMode = given.child === undefined ? 'node' : given.child;
  return {
    name,
    createPoolWorker: (poolOptions) => new ProcwirePoolWorker(poolOptions, name, childMode),
  };
}

module.exports = { procwire, ProcwirePoolWorker };
