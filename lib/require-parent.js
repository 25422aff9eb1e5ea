'use strict';
// requireParent(): the procwire parent channel, or a coded error that says
// why there is none. `procwire.parent` stays null outside a procwire child so
// that `if (procwire.parent)` keeps working; a child script that cannot run
// without its parent calls requireParent() instead and, when its parent
// forked it the wrong way, fails with a message naming the fix rather than
// "Cannot read properties of null".

const { getParent } = require('./fork');
const { makeError } = require('./errors');

// How this process was started, in the words the error uses.
function describeStart() {
  if (typeof process.send === 'function') {
    return 'this process has a Node IPC channel (process.send): it was forked with child_process.fork, ' +
      "or procwire.fork in its default child mode ('native') or 'node'";
  }
  return 'this process has no IPC channel: it was not started by fork()';
}

function requireParent() {
  const parent = getParent();
  if (parent !== null) return parent;
  return throwNoParent();
}

function throwNoParent() {
  const { isMainThread } = require('worker_threads');
  const where = isMainThread ? describeStart() : 'this is a worker thread, which has no procwire parent';
  throw makeError('ERR_PROCWIRE_NO_PARENT',
    `procwire has no parent channel here (${where}). The parent must start this script with ` +
    "procwire.fork(path, { child: 'procwire' }); a script that also runs otherwise can test `if (procwire.parent)` first.");
}

// `procwire.parent` read as null in a child that has Node's IPC channel
// instead (forked without { child: 'procwire' }): the usual next line,
// `procwire.parent.on(...)`, dies with "Cannot read properties of null". The
// getter must stay null (`if (procwire.parent)` is how scripts ask), so the
// crash itself gets a hint: one line on stderr beside Node's report, from an
// 'uncaughtExceptionMonitor' listener that changes nothing else.
let hinted = false;
const CHANNEL_MEMBERS = new Set(['on', 'once', 'off', 'addListener', 'removeListener', 'send', 'request', 'respond',
  'close', 'destroy', 'disconnect', 'ref', 'unref', 'pause', 'resume', 'stats', 'connected', 'closed']);
function noteNullParent() {
  if (hinted || typeof process.send !== 'function') return;
  hinted = true;
  process.on('uncaughtExceptionMonitor', (err) => {
    // Only a read of what a Channel has: another null elsewhere is not ours to explain.
    const m = /Cannot read properties of null \(reading '([^']+)'\)/.exec(String(err && err.message));
    if (!(err instanceof TypeError) || m === null || !CHANNEL_MEMBERS.has(m[1])) return;
    process.stderr.write('procwire: procwire.parent is null in this process: its parent forked it without ' +
      "{ child: 'procwire' } (it has Node's process.send instead). Fork it with procwire.fork(path, " +
      "{ child: 'procwire' }), or call procwire.requireParent() for an ERR_PROCWIRE_NO_PARENT error.\n");
  });
}

module.exports = { requireParent, noteNullParent };
