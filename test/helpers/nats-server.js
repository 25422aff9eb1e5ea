'use strict';
// One nats-server on a free loopback port for the conformance suite, started
// once per process and stopped at exit of the suite (stop()).

const childProcess = require('child_process');
const net = require('net');
const { findExecutable, freePort } = require('../../bench/lib/servers');

const bin = findExecutable('nats-server', []) || findExecutable('nats-server');

function canConnect(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

let running = null;

// -> { url, stop() }, or null when nats-server is not installed.
async function natsServer() {
  if (bin === null) return null;
  if (running !== null) return running;
  const port = await freePort();
  const proc = childProcess.spawn(bin, ['-a', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline && proc.exitCode === null && !(await canConnect(port))) {
    await new Promise((r) => setTimeout(r, 25));
  }
  if (proc.exitCode !== null || Date.now() >= deadline) {
    proc.kill('SIGKILL');
    throw new Error('nats-server did not start');
  }
  running = {
    url: `nats://127.0.0.1:${port}`,
    async stop() {
      running = null;
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      await exited;
    },
  };
  return running;
}

module.exports = { natsServer, natsInstalled: bin !== null };
