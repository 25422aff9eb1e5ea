'use strict';
// new Pool(options): every option checked, with piscina's names and
// meanings where piscina has one, before any worker is forked.

const os = require('os');
const path = require('path');
const url = require('url');
const { invalidArg, validateSize } = require('../validate');
const { transferList } = require('../channel/transfer');

const MAX_TIMEOUT = 2 ** 31 - 1;  // setTimeout's limit
const MAX_WORKERS = 1024;
const RESOURCE_FLAGS = {
  maxOldGenerationSizeMb: (mb) => `--max-old-space-size=${mb}`,
  maxYoungGenerationSizeMb: (mb) => `--max-semi-space-size=${Math.max(1, Math.ceil(mb / 3))}`,
  stackSizeMb: (mb) => `--stack-size=${mb * 1024}`,
};

function filenameOf(value) {
  if (value instanceof URL) return url.fileURLToPath(value);
  if (typeof value !== 'string' || value.length === 0) {
    throw invalidArg('options.filename must be a path or a file: URL of the worker\'s module');
  }
  if (value.startsWith('file:')) return url.fileURLToPath(value);
  return path.resolve(value);
}

function integer(options, name, fallback, min, max) {
  const value = validateSize(options[name], `options.${name}`, fallback, max);
  if (value < min) throw invalidArg(`options.${name} must be at least ${min}, got ${value}`);
  return value;
}

function stringArray(value, name) {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || !value.every((s) => typeof s === 'string')) {
    throw invalidArg(`options.${name} must be an array of strings`);
  }
  return value.slice();
}

// This process's Node options, without code given with -e/-p: a worker
// must run its module, not the parent's program again (as Node's own fork
// strips it).
const EVAL_FLAGS = new Set(['-e', '--eval', '-p', '--print', '-pe']);
function inheritedExecArgv() {
  const out = [];
  const argv = process.execArgv;
  for (let i = 0; i < argv.length; i++) {
    if (EVAL_FLAGS.has(argv[i])) {
      i++;
      continue;
    }
    if (/^--(eval|print)=/.test(argv[i])) continue;
    out.push(argv[i]);
  }
  return out;
}

function resourceArgs(limits) {
  if (limits === undefined) return [];
  if (limits === null || typeof limits !== 'object') throw invalidArg('options.resourceLimits must be an object');
  const out = [];
  for (const [key, value] of Object.entries(limits)) {
    const flag = RESOURCE_FLAGS[key];
    if (flag === undefined) {
      throw invalidArg(`options.resourceLimits.${key} is not supported (use ${Object.keys(RESOURCE_FLAGS).join(', ')})`);
    }
    if (value === undefined) continue;
    if (!Number.isInteger(value) || value < 1 || value > 1 << 20) {
      throw invalidArg(`options.resourceLimits.${key} must be a whole number of MiB from 1, got ${String(value)}`);
    }
    out.push(flag(value));
  }
  return out;
}

function poolSettings(options) {
  if (options === null || typeof options !== 'object') throw invalidArg('new Pool(options): options must be an object');
  const cpus = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
  const filename = filenameOf(options.filename);
  const maxWorkers = integer(options, 'maxWorkers',
    Math.max(1, options.minWorkers === undefined ? cpus : Math.max(cpus, options.minWorkers)), 1, MAX_WORKERS);
  const minWorkers = integer(options, 'minWorkers', Math.min(maxWorkers, Math.max(1, Math.floor(cpus / 2))), 0, MAX_WORKERS);
  if (minWorkers > maxWorkers) {
    throw invalidArg(`options.minWorkers (${minWorkers}) must not exceed options.maxWorkers (${maxWorkers})`);
  }
  const concurrentTasksPerWorker = integer(options, 'concurrentTasksPerWorker', 1, 1, 1 << 20);
  let maxQueue = options.maxQueue;
  if (maxQueue === undefined || maxQueue === Infinity) maxQueue = Infinity;
  else if (maxQueue === 'auto') maxQueue = maxWorkers * maxWorkers;
  else maxQueue = integer(options, 'maxQueue', 0, 0, Number.MAX_SAFE_INTEGER);
  const serialization = options.serialization === undefined ? 'advanced' : options.serialization;
  if (serialization !== 'advanced' && serialization !== 'json') {
    throw invalidArg(`options.serialization must be "advanced" or "json", got ${String(serialization)}`);
  }
  if (options.env !== undefined && (options.env === null || typeof options.env !== 'object')) {
    throw invalidArg('options.env must be an object');
  }
  // The Node binary the workers run (another Node line, a wrapper), as
  // fork()'s own option; a path that does not exist is a failed start, as
  // any spawn error is.
  const execPath = options.execPath;
  if (execPath !== undefined && (typeof execPath !== 'string' || execPath.length === 0 || execPath.includes('\0'))) {
    throw invalidArg('options.execPath must be a non-empty path of a Node binary');
  }
  const name = options.name === undefined ? 'default' : options.name;
  if (typeof name !== 'string' || name.length === 0) throw invalidArg('options.name must be a non-empty string');
  const execArgv = [...(stringArray(options.execArgv, 'execArgv') || inheritedExecArgv()), ...resourceArgs(options.resourceLimits)];
  return {
    filename,
    minWorkers,
    maxWorkers,
    concurrentTasksPerWorker,
    maxQueue,
    idleTimeout: integer(options, 'idleTimeout', 10_000, 0, MAX_TIMEOUT),
    timeout: integer(options, 'timeout', 0, 0, MAX_TIMEOUT),
    abortGracePeriod: integer(options, 'abortGracePeriod', 1000, 0, MAX_TIMEOUT),
    serialization,
    name,
    // The handler a task without a name of its own runs, sent with it: the
    // worker keeps the module's default export under 'default', so
    // run(task, { name: 'default' }) runs it whatever the pool's name, as in
    // piscina, and a missing handler is reported by its own name.
    taskName: name === 'default' ? undefined : name,
    spawn: {
      args: [filename],
      serialization,
      execArgv,
      execPath,
      env: options.env,
    },
  };
}

// run(task, options): the per-task options, checked.
function runSettings(options, settings) {
  if (options === null || typeof options !== 'object') throw invalidArg('run(task, options): options must be an object');
  const { name, signal } = options;
  // piscina's name for the same list; one or the other.
  let transfer = options.transfer;
  if (options.transferList !== undefined) {
    if (transfer !== undefined) throw invalidArg('options.transfer and options.transferList are one list: give one of them');
    transfer = options.transferList;
  }
  if (name !== undefined && (typeof name !== 'string' || name.length === 0)) {
    throw invalidArg('options.name must be a non-empty string');
  }
  if (signal !== undefined && (signal === null || typeof signal !== 'object' || typeof signal.aborted !== 'boolean' ||
      typeof signal.addEventListener !== 'function')) {
    throw invalidArg('options.signal must be an AbortSignal');
  }
  // Checked here, under the name the caller used (piscina's users pass
  // transferList), rather than by the channel when the task is written.
  if (transfer !== undefined) {
    transfer = transferList(transfer, options.transferList !== undefined ? 'options.transferList' : 'options.transfer');
  }
  // piscina's run() takes a module of its own per task; a pool's workers
  // have loaded one, and running it instead of the one asked for would be
  // silently wrong.
  if (options.filename !== undefined && filenameOf(options.filename) !== settings.filename) {
    throw invalidArg('options.filename: a pool runs the one module it was made with; make a pool for each module');
  }
  const timeout = validateSize(options.timeout, 'options.timeout', settings.timeout, MAX_TIMEOUT);
  // 'default' is sent as no name at all, the wire's form for the default export.
  return { name: name === undefined ? settings.taskName : name === 'default' ? undefined : name, signal, transfer, timeout };
}

// close(options) -> whether it is forced.
function closeSettings(options) {
  if (options === undefined) return false;
  if (options === null || typeof options !== 'object' || (options.force !== undefined && typeof options.force !== 'boolean')) {
    throw invalidArg('close(options): options must be an object, and its force a boolean');
  }
  return options.force === true;
}

module.exports = { poolSettings, runSettings, closeSettings };
