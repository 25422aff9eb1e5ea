'use strict';
// procwire: fast, safe message channels between Node.js processes.

const codec = require('./codec');
const { Framer } = require('./framer');
const { Channel } = require('./channel');
const { fork, getParent } = require('./fork');
const { listen, connect } = require('./transport');
const { Server } = require('./transport/socket');
const errors = require('./errors');
const { binding } = require('./native');
const { validateSize } = require('./validate');

// A Buffer over a shared-memory segment: sent with { transfer: [buf] } to a
// procwire peer, it moves without a byte copied.
function alloc(size) {
  validateSize(size, 'size', 0, 2 ** 32 - 1);
  const buf = binding.alloc(size);
  if (typeof buf === 'string') throw errors.systemError('ERR_PROCWIRE_TRANSFER', buf, 'memfd_create');
  return buf;
}

function getCluster() {
  return require('./cluster').loadCluster();
}

module.exports = {
  codec,
  Framer,
  Channel,
  Server,
  fork,
  listen,
  connect,
  alloc,
  errors: errors.classes,
  codes: Object.keys(errors.CODES),
  native: require('./native').native,
  getParent,
  // Read when asked, not at require time: only a procwire child has one, and
  // making it starts reading the channel.
  get parent() {
    return getParent();
  },
  // Node's cluster module, its primary forking through procwire.fork. Read
  // when asked: loading it is what lends cluster procwire's fork.
  getCluster,
  get cluster() {
    return getCluster();
  },
};
