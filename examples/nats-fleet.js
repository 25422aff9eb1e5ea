'use strict';
// A NATS fleet: workers on any number of hosts listen on one subject in a
// queue group; clients connect by subject, not by address, and NATS spreads
// their channels over the workers. This example starts its own private
// nats-server on loopback, two worker processes and a client.
//
// Needs the `nats-server` binary (scripts/setup.sh installs it) and a NATS
// client, an optional peer of procwire: npm install @nats-io/transport-node
// (or an installed `nats` v2).
//
//   node examples/nats-fleet.js

const { spawn, execFileSync } = require('child_process');
const net = require('net');
const path = require('path');
const procwire = require('procwire');

function skip(reason) {
  console.log(`nats-fleet: skipped: ${reason}`);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = /** @type {import('net').AddressInfo} */ (s.address());
      s.close(() => resolve(port));
    }).on('error', reject);
  });
}

// Resolves once the server accepts TCP connections.
async function waitForPort(port, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const ok = await new Promise((resolve) => {
      const c = net.connect(port, '127.0.0.1', () => { c.destroy(); resolve(true); }).on('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`nats-server did not listen on ${port} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function lineFrom(child, text) {
  return new Promise((resolve, reject) => {
    let buf = '';
    child.stdout.on('data', (d) => {
      buf += d;
      if (buf.includes(text)) resolve(undefined);
    });
    child.on('exit', (code) => reject(new Error(`worker exited (${code}) before "${text}"`)));
  });
}

async function main() {
  try {
    execFileSync('nats-server', ['--version'], { stdio: 'ignore' });
  } catch {
    return skip('nats-server is not installed (scripts/setup.sh installs it)');
  }
  const clients = ['@nats-io/transport-node', 'nats'].filter((name) => {
    try {
      require.resolve(name);
      return true;
    } catch {
      return false;
    }
  });
  if (clients.length === 0) return skip('no NATS client is installed (npm install @nats-io/transport-node)');

  const port = await freePort();
  const url = `nats://127.0.0.1:${port}`;
  const server = spawn('nats-server', ['-a', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
  const workers = [];
  try {
    await waitForPort(port, 10_000);
    for (let i = 0; i < 2; i++) {
      const w = spawn(process.execPath, [path.join(__dirname, 'children', 'nats-worker.js'), url],
        { stdio: ['ignore', 'pipe', 'inherit'] });
      workers.push(w);
      await lineFrom(w, 'ready');
    }

    // Each channel is a conversation with one worker: open several to use the fleet.
    const channels = await Promise.all([1, 2, 3, 4].map(() => procwire.connect(url, { subject: 'jobs' })));
    const replies = await Promise.all(channels.map((ch, i) =>
      ch.request({ job: i, text: 'hello nats' }, { timeout: 2000, retries: 3 })));
    for (const r of replies) console.log(`job ${r.job} done by worker ${r.worker}: ${r.result}`);
    console.log('distinct workers used:', new Set(replies.map((r) => r.worker)).size);
    for (const ch of channels) ch.close();
  } finally {
    for (const w of workers) w.kill('SIGTERM');
    await Promise.all(workers.map((w) => new Promise((r) => (w.exitCode !== null ? r(undefined) : w.on('exit', r)))));
    server.kill('SIGTERM');
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
