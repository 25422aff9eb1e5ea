'use strict';
// The pool's internals its collaborators call: a worker slot reports to its
// pool through these, never through underscore properties.

module.exports = {
  kReady: Symbol('procwire.pool.ready'),
  kResult: Symbol('procwire.pool.result'),
  kExit: Symbol('procwire.pool.exit'),
  kCancel: Symbol('procwire.pool.cancel'),
  kUnsent: Symbol('procwire.pool.unsent'),
  kHangup: Symbol('procwire.pool.hangup'),
  kStarted: Symbol('procwire.pool.started'),
};
