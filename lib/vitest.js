'use strict';
// procwire/vitest: a pool for Vitest 4's custom pool API. In vitest.config:
//
//   import { procwire } from 'procwire/vitest';
//   export default { test: { pool: procwire() } };
//
// It runs Vitest's own forks worker (dist/workers/forks.js, the one the
// default `forks` pool runs) in children forked through procwire.fork, so
// Vitest's messages between the main process and its workers take
// procwire's native channel; the rest (scheduling, maxWorkers, isolate,
// execArgv, env) is Vitest's. Vitest is not loaded from here: the pool gets
// everything it needs in createPoolWorker()'s options, so procwire never
// depends on Vitest (an optional peer).
//
// What it adds over the forks pool is a warm spare. With `isolate` (Vitest's
// default) Vitest makes a new worker for every test file and starts it only
// when the previous file of that slot has finished, so a Node start and the
// load of Vitest's worker modules (150-230 ms of CPU on Node 20) sit between
// every two files. The pool forks the next worker while the current file
// runs: a worker's start() takes a spare that was forked with the same entry
// point, execArgv, env and cwd (an idle forks.js that has loaded its modules
// and waits for Vitest's "start" message) and forks the spare for the file
// after it. That start is still paid in CPU, so the spare only gains where a
// core is free while a file waits (docs/benchmarks.md, "Start-up").

const path = require('path');

// As Vitest's forks pool: a worker that does not end on SIGTERM is killed
// after this many ms.
const SIGKILL_AFTER_MS = 500;

// Ends a child: SIGTERM, SIGKILL if it has not exited after SIGKILL_AFTER_MS;
// resolves once it has exited.
async function endChild(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const timer = setTimeout(() => child.kill('SIGKILL'), SIGKILL_AFTER_MS);
  child.kill();
  await exited;
  clearTimeout(timer);
}

// Node options under which a process that never runs a file is not free:
// an inspector binds its port at start (a spare would take or contend for
// the port the running worker's debugger uses), and the profilers write a
// file for every process. Vitest forks per file as before with these.
const NO_SPARE_FLAGS = /^--(inspect|debug|prof|cpu-prof|heap-prof|diagnostic-dir)/;

function allowsSpare(spec) {
  const flags = [...(spec.execArgv || []), ...String((spec.env && spec.env.NODE_OPTIONS) || '').split(/\s+/)];
  return !flags.some((flag) => NO_SPARE_FLAGS.test(flag));
}

// The spares of one pool, keyed by what a worker is forked with: a spare is
// only ever handed to a worker that would have forked the same child.
class SpareWorkers {
  constructor(childMode, enabled) {
    this.childMode = childMode;
    this.enabled = enabled;
    this.byKey = new Map();
    // The Vitest instances whose close ends this pool's spares.
    this.closers = new WeakSet();
  }

  static keyOf(spec) {
    return JSON.stringify([spec.entrypoint, spec.execArgv, spec.env, process.cwd()]);
  }

  // Forks a child for spec: the same options whether it is a spare or not.
  fork(spec) {
    const { fork } = require('./fork');
    return fork(spec.entrypoint, [], {
      env: spec.env, execArgv: spec.execArgv, stdio: 'pipe', serialization: 'advanced', child: this.childMode,
    });
  }

  // A live spare forked for spec, or null; it is no longer a spare.
  take(spec) {
    const spares = this.byKey.get(SpareWorkers.keyOf(spec));
    while (spares !== undefined && spares.length > 0) {
      const { child, onGone } = spares.shift();
      child.off('exit', onGone);
      child.off('error', onGone);
      if (child.exitCode === null && child.signalCode === null) return child;
    }
    return null;
  }

  // Forks a spare for spec. A spare that fails to start or exits is dropped
  // (the worker that would have taken it forks its own, and reports what
  // goes wrong then); its output is held in its pipes until it is taken.
  add(spec) {
    const key = SpareWorkers.keyOf(spec);
    let child;
    try {
      child = this.fork(spec);
    } catch {
      return;
    }
    if (!this.byKey.has(key)) this.byKey.set(key, []);
    const spares = this.byKey.get(key);
    const entry = { child, onGone: null };
    entry.onGone = () => {
      const index = spares.indexOf(entry);
      if (index !== -1) spares.splice(index, 1);
    };
    child.once('exit', entry.onGone);
    // 'error' (a failed spawn or kill) may come more than once; each drops it.
    child.on('error', entry.onGone);
    spares.push(entry);
  }

  // Ends the spares when the Vitest instance closes (after its run, or when
  // watch mode ends), so no idle worker outlives it.
  endWith(vitest) {
    if (vitest === undefined || vitest === null || typeof vitest.onClose !== 'function' || this.closers.has(vitest)) return;
    this.closers.add(vitest);
    vitest.onClose(() => this.endAll());
  }

  async endAll() {
    const children = [];
    for (const spares of this.byKey.values()) {
      for (const { child, onGone } of spares.splice(0)) {
        child.off('error', onGone);
        // An error while it ends (a failed kill) has nobody left to tell.
        child.on('error', () => {});
        children.push(child);
      }
    }
    await Promise.all(children.map(endChild));
  }
}

// One Vitest worker: Vitest's PoolWorker contract (start, stop, send, on,
// off, deserialize) over one procwire child.
class ProcwirePoolWorker {
  constructor(options, name, spares) {
    this.name = name;
    this.spares = spares;
    // Vitest may cache file reads for a worker that is a process of its own.
    this.cacheFs = true;
    this.spec = {
      entrypoint: path.resolve(options.distPath, 'workers', 'forks.js'), execArgv: options.execArgv, env: options.env,
    };
    // With isolate: false Vitest reuses a worker for the files after its
    // first, so a spare would mostly wait to be ended.
    this.useSpare = spares.enabled && options.project.config.isolate !== false && allowsSpare(this.spec);
    this.stdout = options.project.vitest.logger.outputStream;
    this.stderr = options.project.vitest.logger.errorStream;
    if (this.useSpare) spares.endWith(options.project.vitest);
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
    this.child = (this.useSpare && this.spares.take(this.spec)) || this.spares.fork(this.spec);
    // The next file's worker starts while this one runs.
    if (this.useSpare) this.spares.add(this.spec);
    // The worker's output goes where Vitest's own workers' does; the logger's
    // streams outlive every worker, so they are not ended with it.
    this.child.stdout.pipe(this.stdout, { end: false });
    this.child.stderr.pipe(this.stderr, { end: false });
  }

  async stop() {
    const child = this.child;
    if (child === null) return;
    await endChild(child);
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
// the worker's end natively too. options.spare: false forks every worker
// when Vitest starts it, as the forks pool does (no spare, no process that
// may go unused).
function procwire(options = {}) {
  const given = options !== null && typeof options === 'object' ? options : {};
  const name = typeof given.name === 'string' ? given.name : 'procwire';
  const spares = new SpareWorkers(given.child === undefined ? 'node' : given.child, given.spare !== false);
  return {
    name,
    createPoolWorker: (poolOptions) => new ProcwirePoolWorker(poolOptions, name, spares),
  };
}

module.exports = { procwire, ProcwirePoolWorker };
