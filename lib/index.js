'use strict';
// procwire: fast, safe message channels between Node.js processes.

// First, so that lib/fork.js and what it loads come from the parent's start
// bundle when it is current (see lib/start-bundle.js). This file's other
// modules are taken through parentRequire() too: lib/fork.js has loaded
// them, and a relative require() of each would still resolve it (stat()s,
// a package.json read for a directory) for what is in require.cache
// already. When the bundle is not used, parentRequire() is require() of the
// same file.
const { parentRequire } = require('./start-bundle');
const { fork, getParent } = parentRequire('lib/fork.js');
const { requireParent, noteNullParent } = parentRequire('lib/require-parent.js');
const codec = parentRequire('lib/codec/index.js');
const { Channel } = parentRequire('lib/channel.js');
const errors = parentRequire('lib/errors.js');
const { binding, native } = parentRequire('lib/native.js');
const { validateSize, invalidArg } = parentRequire('lib/validate.js');

// A Buffer over a shared-memory segment: sent with { transfer: [buf] } to a
// procwire peer, it moves without a byte copied.
function alloc(size) {
  validateSize(size, 'size', 0, 2 ** 32 - 1);
  const buf = binding.alloc(size);
  if (typeof buf === 'string') throw errors.systemError('ERR_PROCWIRE_TRANSFER', buf, 'memfd_create');
  return buf;
}

// Hands a received Buffer's recycled shared-memory segment back to its
// sender now, instead of when the Buffer is collected. The Buffer (and every
// view of its ArrayBuffer) becomes empty. Returns false, doing nothing, for
// anything else (an ordinary Buffer, one from a sealed segment, the JS
// fallback).
function release(view) {
  let ab = view;
  if (ArrayBuffer.isView(view)) ab = view.buffer;
  if (!(ab instanceof ArrayBuffer)) {
    throw invalidArg('release() takes an ArrayBuffer, a Buffer or a typed array');
  }
  return typeof binding.releaseSegment === 'function' ? binding.releaseSegment(ab) === true : false;
}

// The listening and connecting side is loaded when first used: a child that
// only talks to its parent (a pool worker, a procwire child) never pays for
// it at start-up.
function listen(...args) {
  return require('./transport').listen(...args);
}

function connect(...args) {
  return require('./transport').connect(...args);
}

function getCluster() {
  return require('./cluster').loadCluster();
}

module.exports = {
  codec,
  // Loaded when first asked for, as the other parts a forked child's
  // channel does not need.
  get Framer() {
    return require('./framer').Framer;
  },
  Channel,
  get Server() {
    return require('./transport/socket').Server;
  },
  fork,
  listen,
  connect,
  alloc,
  release,
  // Made when first asked for: most processes (a forked child above all)
  // never look at the classes, only at errors' codes.
  get errors() {
    return errors.classes;
  },
  codes: Object.keys(errors.CODES),
  native,
  getParent,
  requireParent,
  // Read when asked, not at require time: only a procwire child has one, and
  // making it starts reading the channel.
  get parent() {
    const parent = getParent();
    if (parent === null) noteNullParent();
    return parent;
  },
  // Node's cluster module, its primary forking through procwire.fork. Read
  // when asked: loading it is what lends cluster procwire's fork.
  getCluster,
  get cluster() {
    return getCluster();
  },
  // The process pool (docs/pool.md), loaded when first asked for: a
  // procwire child or a plain channel user never pays for it.
  get Pool() {
    return require('./pool').Pool;
  },
};
