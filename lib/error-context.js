'use strict';
// Context for errors that reach user code asynchronously: where the call that
// failed was made, which child a closed fork channel belonged to (pid, exit
// code or signal, the tail of its stderr), where a connect() went, and
// whether a request timed out while its child was still starting. Channel and
// fork reach these through the exported functions and symbol below; they keep
// no state of their own.

// Set by fork() on the parent's channel: a function (err) -> Promise that
// resolves once `err` carries what is known about the child's exit.
const kCloseContext = Symbol('procwire.closeContext');

// How long a fork channel's failed requests wait for the child's exit status
// after the channel closed. A child that closed its channel and lives on
// (process.disconnect()) costs its requests this much, no more.
const EXIT_WAIT_MS = 2000;
// The last bytes of a piped stderr an error quotes.
const STDERR_TAIL_BYTES = 2048;

// The frames of the code that awaits a failed call, added to the error's
// stack. An error made in a timer or an I/O callback (a timeout, a closed
// channel) has only procwire's frames; a new Error made here, in an async
// function that the rejection resumed, has V8's async frames ("at async
// yourFunction") of everyone awaiting it. Nothing is captured unless the call
// fails: taking a stack at every call would cost each request microseconds.
async function withCallerFrames(promise) {
  try {
    return await promise;
  } catch (err) {
    throw attachAsyncFrames(err);
  }
}

// Appends the async frames of the current await chain to err.stack, once.
function attachAsyncFrames(err) {
  if (err === null || typeof err !== 'object' || typeof err.stack !== 'string' || Error.stackTraceLimit === 0) return err;
  const frames = new Error().stack.split('\n').filter((line) => /^\s+at async /.test(line));
  if (frames.length === 0) return err;
  const text = frames.join('\n');
  if (!err.stack.includes(text)) err.stack = `${err.stack}\n${text}`;
  return err;
}

// A connect error names where it went: err.address (a host or a path) and
// err.port, and the message says it unless it already does.
function withAddress(err, address, where) {
  if (err === null || typeof err !== 'object' || err.code !== 'ERR_PROCWIRE_CONNECT_FAILED') return err;
  if (address.kind === 'tcp') {
    err.address = address.host;
    err.port = address.port;
  } else {
    err.address = address.path;
  }
  if (typeof err.message === 'string' && !err.message.includes(where)) {
    const old = err.message;
    err.message = /^connect failed/.test(old) ? old.replace(/^connect failed/, `connect ${where} failed`) : `${old} (${where})`;
    if (typeof err.stack === 'string') err.stack = err.stack.replace(old, err.message);
  }
  return err;
}

// The tail of what the child wrote to a piped stderr that nothing has read:
// read from the stream's buffer and put back, so a later reader misses nothing.
function stderrTail(child) {
  const stream = child.stderr;
  if (!stream || typeof stream.read !== 'function' || stream.readableFlowing === true || stream.destroyed) return '';
  const chunks = [];
  let chunk;
  while ((chunk = stream.read()) !== null) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
  if (chunks.length === 0) return '';
  const all = Buffer.concat(chunks);
  stream.unshift(all);
  return all.subarray(Math.max(0, all.length - STDERR_TAIL_BYTES)).toString('utf8').trimEnd();
}

function describeExit(child) {
  if (child.signalCode) return `child ${child.pid} was killed by ${child.signalCode}`;
  if (child.exitCode !== null) return `child ${child.pid} exited with code ${child.exitCode}`;
  return `child ${child.pid} is still running`;
}

// Fills a fork channel's close error from its child: pid now, exit status and
// stderr once the child has exited (waiting at most EXIT_WAIT_MS for it).
function childCloseContext(child) {
  return (err) => new Promise((resolve) => {
    err.pid = child.pid;
    const fill = () => {
      clearTimeout(timer);
      child.removeListener('exit', fill);
      err.exitCode = child.exitCode;
      err.signalCode = child.signalCode;
      const tail = stderrTail(child);
      if (tail) err.stderr = tail;
      const old = err.message;
      err.message = `${old}: ${describeExit(child)}${tail ? `; the end of its stderr:\n${tail}` : ''}`;
      if (typeof err.stack === 'string') err.stack = err.stack.replace(old, err.message);
      resolve(err);
    };
    const exited = child.exitCode !== null || child.signalCode !== null;
    const timer = exited ? undefined : setTimeout(fill, EXIT_WAIT_MS);
    if (timer !== undefined) timer.unref();
    if (exited) fill(); else child.once('exit', fill);
  });
}

// A request timeout's message, saying so when the peer had sent nothing yet:
// a fork child that is still starting spends the request's time on it.
function timeoutMessage(channel, timeout) {
  let message = `no reply within ${timeout} ms`;
  if (channel.transport === 'fork') {
    const stats = channel.stats();
    if (stats !== null && stats.bytesIn === 0) {
      message += ' (the child had not sent anything yet: it may still be starting, and its start-up ' +
        'counts toward the timeout; raise the timeout or wait for a first message)';
    }
  }
  return message;
}

// Settles a closed channel's pending requests through settleOne(id, err),
// after the channel's close context (if any) has filled the error. Each
// request gets its own error, so that each carries its own caller.
function settleClosed(channel, ids, makeClosedError, settleOne) {
  if (ids.length === 0) return;
  const context = channel[kCloseContext];
  const first = makeClosedError();
  const settle = () => {
    for (let i = 0; i < ids.length; i++) {
      const err = i === 0 ? first : Object.assign(makeClosedError(first.message), copyContext(first));
      settleOne(ids[i], err);
    }
  };
  if (typeof context !== 'function' || first.reason === 'local' || first.reason === 'destroyed') settle();
  else context(first).then(settle);
}

function copyContext(err) {
  const out = {};
  for (const key of ['pid', 'exitCode', 'signalCode', 'stderr']) if (err[key] !== undefined) out[key] = err[key];
  return out;
}

module.exports = {
  kCloseContext, withCallerFrames, attachAsyncFrames, withAddress, childCloseContext, timeoutMessage, settleClosed, EXIT_WAIT_MS,
};
