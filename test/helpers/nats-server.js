'use strict';
// nats-server processes on free loopback ports: startNatsServer() starts one
// for a caller that stops it (test/docs.test.js), natsServer() one shared by
// the conformance suite, started once per process and stopped at the end of
// the suite (stopNatsServer()).

const childProcess = require('child_process');
const fs = require('fs');
const http = require('http');
const os = require('os');
const path = require('path');
const { findExecutable, freePort } = require('../../bench/lib/servers');

const bin = findExecutable('nats-server', []) || findExecutable('nats-server');

// GET http://127.0.0.1:<port><urlPath> as JSON, or null (no answer within a
// second, not JSON, or nothing listening).
function getJson(port, urlPath) {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: urlPath, timeout: 1000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { body += c; });
      res.on('end', () => { try { resolve(JSON.parse(body)); } catch { resolve(null); } });
    });
    req.on('error', () => resolve(null));
    req.on('timeout', () => { req.destroy(); resolve(null); });
  });
}

// Whether the server answering on `monitor` is the one named `name` serving
// clients on `port`: a port that merely accepts could belong to another
// process that took it first.
async function servesAs(monitor, name, port) {
  const varz = await getJson(monitor, '/varz');
  return varz !== null && varz.server_name === name && varz.port === port;
}

// One attempt on the given ports: resolves once the server's own monitor
// names it (a port that merely accepts could belong to another process that
// took it first), or kills it and rejects after 10 s or when it exits.
async function startOn(port, monitor) {
  const name = `procwire-test-${process.pid}-${port}`;
  // JetStream on (durable channels in docs), its store in a temporary
  // directory removed with the server.
  const store = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-natsjs-'));
  const proc = childProcess.spawn(bin, ['-a', '127.0.0.1', '-p', String(port), '-m', String(monitor), '-n', name,
    '-js', '-sd', store], { stdio: 'ignore' });
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 3000);
    await exited;
    clearTimeout(timer);
    fs.rmSync(store, { recursive: true, force: true });
  };
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline && proc.exitCode === null) {
    if (await servesAs(monitor, name, port) && proc.exitCode === null) {
      return { url: `nats://127.0.0.1:${port}`, port, stop };
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  proc.kill('SIGKILL');
  await exited;
  fs.rmSync(store, { recursive: true, force: true });
  throw new Error(`nats-server did not start on port ${port} (monitor ${monitor})`);
}

// -> { url, port, stop() }. Free ports can be taken by another process
// before the server binds them, so a server that does not come up is tried
// again on fresh ports, three times in all.
async function startNatsServer() {
  if (bin === null) throw new Error('nats-server is not installed');
  let failure = null;
  for (let attempt = 1; attempt <= 3; attempt++) {
    try {
      return await startOn(await freePort(), await freePort());
    } catch (err) {
      failure = err;
    }
  }
  throw failure;
}

let running = null;
let starting = null;

// -> { url, stop() } of the shared server, started now if need be, or null
// when nats-server is not installed.
async function natsServer() {
  if (bin === null) return null;
  if (running !== null) return running;
  if (starting === null) {
    starting = startNatsServer().then((server) => {
      running = {
        url: server.url,
        async stop() {
          running = null;
          await server.stop();
        },
      };
      return running;
    }).finally(() => { starting = null; });
  }
  return starting;
}

// Stops the shared server if one runs or is starting, and starts none: a
// suite's end must not start a server only to stop it.
async function stopNatsServer() {
  if (starting !== null) await starting.catch(() => {});
  if (running !== null) await running.stop();
}

module.exports = { natsServer, stopNatsServer, startNatsServer, getJson, servesAs, natsInstalled: bin !== null };
