'use strict';
// A write that found the peer gone, as the child_process surface reports it.
// Node's send() tries the write at once, and a peer that has died makes it
// fail with EPIPE (ECONNRESET when the peer left unread data behind): the
// callback gets that error, or else the ChildProcess (or the child's
// `process`) emits it as 'error', unhandled unless someone listens. A
// procwire channel gathers a tick's writes and learns of the failure at the
// tick's flush; Channel calls channel[kWriteFailed](errnoName, written) then,
// and the surface turns it into Node's error (lib/child-process-ipc.js).

const kWriteFailed = Symbol('procwire.writeFailed');

// Node's ErrnoException(err, 'write'): "write EPIPE", with errno (negative,
// as libuv's), code and syscall.
function writeErrnoException(errnoName) {
  const number = require('os').constants.errno[errnoName];
  const err = new Error(`write ${errnoName}`);
  err.errno = number === undefined ? undefined : -number;
  err.code = errnoName;
  err.syscall = 'write';
  return err;
}

module.exports = { kWriteFailed, writeErrnoException };
