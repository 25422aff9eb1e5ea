'use strict';
// procwire.cluster: Node's own cluster module, with its primary forking the
// workers through procwire.fork (so their IPC, handles included, runs on the
// native channel). Workers stay plain Node and run Node's own cluster code.
//
// Node's cluster primary takes `fork` from child_process once, when it is
// first loaded. procwire lends it procwire.fork for exactly that moment and
// puts child_process.fork back at once: nothing global stays changed, and
// code that calls child_process.fork itself still gets Node's. This has to
// happen before anything loads cluster (net loads it on a server's first
// listen()); later, the primary already holds Node's fork and
// ERR_PROCWIRE_CLUSTER_LOADED says so.

const { makeError } = require('./errors');
const { fork } = require('./fork');

const PRIMARY_MODULE = 'NativeModule internal/cluster/primary';
let cluster = null;

function loadCluster() {
  if (cluster !== null) return cluster;
  // A worker (started by a cluster primary) runs Node's worker side, which
  // forks nothing.
  if ('NODE_UNIQUE_ID' in process.env) {
    cluster = require('cluster');
    return cluster;
  }
  if (Array.isArray(process.moduleLoadList) && process.moduleLoadList.includes(PRIMARY_MODULE)) {
    throw makeError('ERR_PROCWIRE_CLUSTER_LOADED',
      'cluster was loaded before procwire.cluster (a server listened, or something required cluster): ' +
      'its primary already forks with child_process.fork; use procwire.cluster first');
  }
  const childProcess = require('child_process');
  const original = childProcess.fork;
  childProcess.fork = fork;
  try {
    cluster = require('cluster');
  } finally {
    childProcess.fork = original;
  }
  return cluster;
}

module.exports = { loadCluster };
