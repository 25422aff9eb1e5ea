'use strict';
// The errors a pool task is rejected with when its worker failed it (the
// handler's own error, the worker's death, a module that could not load)
// or it was cancelled.
// Each carries what the pool knows of the worker (pid, exit code or signal,
// the tail of its stderr), as docs/pool.md and docs/errors.md say.

const { makeError } = require('../errors');

function remoteError(remote, task) {
  const r = remote !== null && typeof remote === 'object' ? remote : { message: String(remote) };
  const code = r.code === 'ERR_PROCWIRE_POOL_NO_HANDLER' ? r.code : 'ERR_PROCWIRE_REMOTE_ERROR';
  return makeError(code, String(r.message), undefined, {
    remote: { name: r.name, message: r.message, code: r.code, stack: r.stack },
    ...(code === 'ERR_PROCWIRE_POOL_NO_HANDLER' ? { taskName: task.name || 'default' } : {}),
  });
}

function exitDetails(slot) {
  const { exitCode, signalCode } = slot.exit || {};
  return { pid: slot.pid, exitCode: exitCode === undefined ? null : exitCode, signalCode: signalCode || null, stderr: slot.stderr };
}

// How it ended and the last lines of its stderr, for an error's message.
function howItEnded(details) {
  const how = details.signalCode ? `signal ${details.signalCode}` : `exit code ${details.exitCode}`;
  const tail = details.stderr ? `; stderr ends:\n${details.stderr.trimEnd().split('\n').slice(-5).join('\n')}` : '';
  return { how, tail };
}

function exitedError(slot) {
  const details = exitDetails(slot);
  const { how, tail } = howItEnded(details);
  const why = slot.killedFor === 'grace' ? ' (killed: an aborted task did not stop within abortGracePeriod)'
    : slot.hungUp ? ' (it had closed its channel, so it could not answer)' : '';
  return makeError('ERR_PROCWIRE_POOL_WORKER_EXITED',
    `pool worker ${slot.pid} exited while running the task (${how})${why}${tail}`, undefined, details);
}

function startError(slot) {
  const details = exitDetails(slot);
  const remote = slot.loadError;
  let cause;
  let message;
  if (remote !== null) {
    cause = new Error(remote.message);
    cause.name = remote.name;
    if (remote.code !== undefined) cause.code = remote.code;
    if (remote.stack !== undefined) cause.stack = remote.stack;
    message = `pool worker could not load its module: ${remote.message}`;
  } else {
    const { how, tail } = howItEnded(details);
    message = `pool worker ${slot.pid} exited before it was ready (${how})${tail}`;
  }
  return makeError('ERR_PROCWIRE_POOL_WORKER_START', message, cause, details);
}

// A task aborted or timed out: where it was then ('queued', 'unsent': given
// to a worker in that tick but not written yet, or 'running').
const WHERE = {
  queued: 'while it waited in the queue',
  unsent: 'before it was sent to its worker',
  running: 'while it ran (its worker was asked to stop)',
};
function cancelError(code, reason, where) {
  const what = code === 'ERR_PROCWIRE_TASK_TIMEOUT' ? 'timed out' : 'was aborted';
  return makeError(code, `the task ${what} ${WHERE[where]}`, reason);
}

module.exports = { remoteError, exitedError, startError, cancelError };
