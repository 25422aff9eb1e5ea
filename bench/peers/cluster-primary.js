'use strict';
// The primary of bench/cluster-http.js: Node's cluster with 2 HTTP workers,
// forked through procwire (procwire.cluster) or Node (argv[2] === 'node').
// It reports { port } once both workers listen, and on { op: 'cpu' } its own
// CPU time, so the load generator's CPU never counts as the primary's. The
// control channel to the bench driver is Node's own IPC (process.send).

const http = require('http');
const useProcwire = process.argv[2] === 'procwire';
const cluster = useProcwire ? require('../..').cluster : require('cluster');
cluster.schedulingPolicy = process.argv[3] === 'none' ? cluster.SCHED_NONE : cluster.SCHED_RR;

if (cluster.isPrimary) {
  const workers = [cluster.fork(), cluster.fork()];
  let listening = 0;
  cluster.on('listening', (worker, address) => {
    if (++listening === workers.length) process.send({ port: address.port });
  });
  process.on('message', (m) => {
    if (m.op === 'cpu') process.send({ cpu: process.cpuUsage() });
    if (m.op === 'stop') cluster.disconnect(() => process.exit(0));
  });
} else {
  http.createServer((req, res) => res.end('ok')).listen(0, '127.0.0.1');
}
