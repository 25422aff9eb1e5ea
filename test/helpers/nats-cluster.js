'use strict';
// A JetStream cluster of nats-server processes on loopback for the tests
// and benchmarks: three (or `count`) routed servers, each with JetStream and
// its store in a private temporary directory that stop() removes. Ports are
// picked free; a cluster that does not come up (a port taken meanwhile by
// another process) is stopped whole and started again on fresh ports.

const childProcess = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { findExecutable, freePort } = require('../../bench/lib/servers');
const { getJson, servesAs } = require('./nats-server');

const bin = findExecutable('nats-server', []) || findExecutable('nats-server');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

class ClusterNode {
  constructor(dir, spec) {
    this.dir = dir;
    this.spec = spec;
    this.proc = null;
    this.exited = Promise.resolve();
  }

  get url() { return `nats://127.0.0.1:${this.spec.port}`; }

  get alive() { return this.proc !== null && this.proc.exitCode === null && this.proc.signalCode === null; }

  start() {
    const s = this.spec;
    const args = ['-a', '127.0.0.1', '-p', String(s.port), '-n', s.name, '-m', String(s.monitor),
      '-js', '-sd', path.join(this.dir, s.name), '-l', path.join(this.dir, `${s.name}.log`)];
    if (s.cluster) {
      args.push('--cluster', `nats://127.0.0.1:${s.cluster}`, '--cluster_name', s.clusterName,
        '--routes', s.routes.map((p) => `nats://127.0.0.1:${p}`).join(','));
    }
    this.proc = childProcess.spawn(bin, args, { stdio: 'ignore' });
    const proc = this.proc;
    this.exited = new Promise((r) => proc.once('exit', r));
  }

  // SIGKILL by default: a server that dies, not one that shuts down.
  async kill(signal = 'SIGKILL') {
    if (!this.alive) return;
    try { process.kill(this.proc.pid, signal); } catch { /* gone */ }
    const timer = setTimeout(() => { try { process.kill(this.proc.pid, 'SIGKILL'); } catch { /* gone */ } }, 3000);
    await this.exited;
    clearTimeout(timer);
  }

  log() {
    try { return fs.readFileSync(path.join(this.dir, `${this.spec.name}.log`), 'utf8').split('\n').slice(-5).join(' / '); } catch { return ''; }
  }
}

// Ready: every server answers as itself, is routed to the others, and
// JetStream has a meta leader (a stream can be made).
async function ready(nodes, deadline) {
  while (Date.now() < deadline) {
    if (nodes.some((n) => !n.alive)) throw new Error(`a nats-server exited: ${nodes.map((n) => n.log()).join(' | ')}`);
    const ok = await Promise.all(nodes.map(async (n) => {
      if (!await servesAs(n.spec.monitor, n.spec.name, n.spec.port)) return false;
      if (nodes.length > 1) {
        const routez = await getJson(n.spec.monitor, '/routez');
        if (!routez || routez.num_routes < nodes.length - 1) return false;
      }
      const jsz = await getJson(n.spec.monitor, '/jsz');
      return Boolean(jsz && (nodes.length === 1 || (jsz.meta_cluster && jsz.meta_cluster.leader)));
    }));
    if (ok.every(Boolean)) return;
    await sleep(100);
  }
  throw new Error('the NATS cluster did not become ready in time');
}

// -> { urls, nodes, dir, stop() }. count 1 is a single JetStream server.
async function startJetStreamCluster(count = 3, { timeoutMs = 30_000 } = {}) {
  if (bin === null) throw new Error('nats-server is not installed');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-jsc-'));
  const all = [];
  const stop = async () => {
    await Promise.all(all.map((n) => n.kill('SIGTERM')));
    fs.rmSync(dir, { recursive: true, force: true });
  };
  let failure = null;
  for (let attempt = 1; attempt <= 3; attempt++) {
    const clusterName = `procwire-${process.pid}-${attempt}`;
    const specs = [];
    for (let i = 0; i < count; i++) {
      specs.push({
        name: `js${attempt}-${i + 1}`, port: await freePort(), monitor: await freePort(),
        cluster: count > 1 ? await freePort() : 0, clusterName,
      });
    }
    for (const s of specs) s.routes = specs.filter((o) => o !== s).map((o) => o.cluster);
    const nodes = specs.map((s) => new ClusterNode(dir, s));
    all.push(...nodes);
    try {
      for (const n of nodes) n.start();
      await ready(nodes, Date.now() + timeoutMs);
      return { urls: nodes.map((n) => n.url), nodes, dir, stop };
    } catch (err) {
      failure = err;
      await Promise.all(nodes.map((n) => n.kill()));
    }
  }
  await stop();
  throw failure;
}

module.exports = { startJetStreamCluster, natsServerInstalled: bin !== null };
