'use strict';
// Helpers for the real servers the benchmarks and tests start (redis-server,
// nats-server): find the executable, pick a free loopback port, and stop a
// server by pid (SIGTERM, then SIGKILL after a grace period).

const fs = require('fs');
const net = require('net');
const path = require('path');

function findExecutable(name, extraDirs = ['/usr/sbin', '/usr/local/bin']) {
  for (const dir of (process.env.PATH || '').split(':').concat(extraDirs)) {
    const file = path.join(dir || '.', name);
    try {
      fs.accessSync(file, fs.constants.X_OK);
      return file;
    } catch { /* next */ }
  }
  return null;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// stop() for a spawned server: resolves once it has exited.
function stopper(proc, onStopped = () => {}) {
  let exited = proc.exitCode !== null || proc.signalCode !== null;
  proc.on('exit', () => { exited = true; });
  const stop = async () => {
    if (!exited) {
      const gone = new Promise((r) => proc.once('exit', r));
      try { process.kill(proc.pid, 'SIGTERM'); } catch { /* gone */ }
      const timer = setTimeout(() => { try { process.kill(proc.pid, 'SIGKILL'); } catch { /* gone */ } }, 3000);
      await gone;
      clearTimeout(timer);
    }
    onStopped();
  };
  return { stop, exited: () => exited };
}

module.exports = { findExecutable, freePort, stopper };
