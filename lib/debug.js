'use strict';
// NODE_DEBUG=procwire: what procwire decides, on stderr, through
// util.debuglog (the switch undici and Node's own modules use):
//
//   NODE_DEBUG=procwire node app.js
//   PROCWIRE 12345: channel fork open (fd 3, json)
//
// Callers: connection lifecycle (connect, listen, close), the hello,
// capabilities, rings and segments, and the pool and register decisions.
// Off, a call costs one property read: callers with arguments that are
// costly to compute test `debug.enabled` first.

const util = require('util');

const log = util.debuglog('procwire');

// debug(format, ...args): util.format-style, one line.
function debug(format, ...args) {
  if (debug.enabled) log(format, ...args);
}

// NODE_DEBUG is read once, when the process starts.
debug.enabled = log.enabled === true;

module.exports = { debug };
