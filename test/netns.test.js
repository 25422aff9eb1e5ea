'use strict';
// TCP between two hosts, with TLS and the authenticated hello: two network
// namespaces on this machine joined by a veth pair, made and removed by this
// test. Each end runs in its own namespace, so traffic crosses a real (if
// virtual) link, not loopback.

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');
const procwire = require('..');

if (process.argv[2] === 'child') {
  const [role, host, port, certDir] = process.argv.slice(3);
  const ca = fs.readFileSync(path.join(certDir, 'cert.pem'));
  if (role === 'server') {
    const server = procwire.listen({ port: Number(port), host }, {
      tls: { key: fs.readFileSync(path.join(certDir, 'key.pem')), cert: ca },
    });
    server.on('channel', (ch) => {
      ch.on('message', (m) => ch.send(m));
      ch.respond(async (v) => ({ echo: v, from: os.hostname() }));
    });
    server.on('reject', (err) => process.stdout.write(`reject ${err.code}\n`));
    server.ready.then(() => process.stdout.write('listening\n'));
  } else {
    (async () => {
      const result = {};
      try {
        await procwire.connect({ port: Number(port), host }, { secret: 'x'.repeat(32), tls: { ca } });
        result.wrongSecret = 'accepted';
      } catch (err) {
        result.wrongSecret = err.code;
      }
      const ch = await procwire.connect({ port: Number(port), host }, { tls: { ca } });
      const n = 10_000;
      let expected = 0;
      let bad = 0;
      const done = new Promise((resolve) => ch.on('message', (m) => {
        if (m !== expected++) bad++;
        if (expected === n) resolve();
      }));
      for (let i = 0; i < n; i++) if (!ch.send(i)) await new Promise((r) => ch.once('drain', r));
      await done;
      const replies = await Promise.all(Array.from({ length: 100 }, (_, i) => ch.request(i, { timeout: 10_000 })));
      result.echoed = expected;
      result.bad = bad;
      result.replies = replies.every((r, i) => r.echo === i);
      result.transport = ch.transport;
      ch.close();
      process.stdout.write(`${JSON.stringify(result)}\n`);
    })().catch((err) => { process.stdout.write(`${JSON.stringify({ error: err.code || err.message })}\n`); process.exit(1); });
  }
  return;
}

function sh(cmd, args) {
  return childProcess.execFileSync(cmd, args, { stdio: 'pipe' }).toString();
}

function namespacesUsable() {
  if (process.getuid() !== 0) return 'needs root to create network namespaces';
  try {
    sh('ip', ['netns', 'list']);
  } catch (err) {
    return `ip netns unavailable: ${err.message}`;
  }
  try {
    childProcess.execFileSync('openssl', ['version'], { stdio: 'pipe' });
  } catch {
    return 'openssl is needed to make the test certificate';
  }
  return null;
}

function lineFrom(child, predicate, timeoutMs) {
  return new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`no matching output within ${timeoutMs} ms: ${buf}`)), timeoutMs);
    child.stdout.on('data', (d) => {
      buf += d;
      for (const line of buf.split('\n')) {
        if (predicate(line)) {
          clearTimeout(timer);
          resolve(line);
          return;
        }
      }
    });
  });
}

// Namespaces are named pwA-<pid>-<random> and pwB-<pid>-<random> (the pid in
// base 36), so that a run never meets a name of another run, and a run that
// was killed before its cleanup leaves names the next run can recognise.
const NS_NAME = /^pw[AB]-([0-9a-z]+)-[0-9a-f]+$/;

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

// Deletes the namespaces (and with them their veth ends) of earlier runs
// whose process is gone; those of runs still going are left alone.
function deleteStaleNamespaces() {
  for (const line of sh('ip', ['netns', 'list']).split('\n')) {
    const name = line.split(' ')[0];
    const m = NS_NAME.exec(name);
    if (m && !alive(parseInt(m[1], 36))) {
      try { sh('ip', ['netns', 'del', name]); } catch { /* deleted meanwhile */ }
    }
  }
}

const why = namespacesUsable();
test('TCP + TLS + authenticated hello between two network namespaces (veth pair)', { timeout: 90_000, skip: why || false }, async (t) => {
  deleteStaleNamespaces();
  const run = `${process.pid.toString(36)}-${crypto.randomBytes(3).toString('hex')}`;
  const nsA = `pwA-${run}`;
  const nsB = `pwB-${run}`;
  // Interface names have at most 15 characters: a random tag of 8.
  const tag = crypto.randomBytes(4).toString('hex');
  const octet = 1 + (process.pid % 250);
  const ipA = `10.213.${octet}.1`;
  const ipB = `10.213.${octet}.2`;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pw-netns-'));
  const children = [];
  t.after(() => {
    for (const c of children) { try { c.kill('SIGKILL'); } catch { /* gone */ } }
    for (const ns of [nsA, nsB]) { try { sh('ip', ['netns', 'del', ns]); } catch { /* gone */ } }
    // The veth pair, in case it was made but not yet moved into a namespace.
    try { sh('ip', ['link', 'del', `va${tag}`]); } catch { /* gone with its namespace */ }
    fs.rmSync(dir, { recursive: true, force: true });
  });
  sh('ip', ['netns', 'add', nsA]);
  sh('ip', ['netns', 'add', nsB]);
  sh('ip', ['link', 'add', `va${tag}`, 'type', 'veth', 'peer', 'name', `vb${tag}`]);
  sh('ip', ['link', 'set', `va${tag}`, 'netns', nsA]);
  sh('ip', ['link', 'set', `vb${tag}`, 'netns', nsB]);
  sh('ip', ['-n', nsA, 'addr', 'add', `${ipA}/24`, 'dev', `va${tag}`]);
  sh('ip', ['-n', nsB, 'addr', 'add', `${ipB}/24`, 'dev', `vb${tag}`]);
  for (const [ns, dev] of [[nsA, `va${tag}`], [nsB, `vb${tag}`]]) {
    sh('ip', ['-n', ns, 'link', 'set', dev, 'up']);
    sh('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
  }
  sh('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem'), '-days', '1',
    '-subj', '/CN=procwire-test', '-addext', `subjectAltName=IP:${ipA}`]);

  const env = { ...process.env, PROCWIRE_SECRET: 's'.repeat(32) };
  const server = childProcess.spawn('ip', ['netns', 'exec', nsA, process.execPath, __filename, 'child', 'server', ipA, '7443', dir],
    { env, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(server);
  await lineFrom(server, (l) => l === 'listening', 20_000);
  const rejected = lineFrom(server, (l) => l.startsWith('reject '), 20_000);

  const client = childProcess.spawn('ip', ['netns', 'exec', nsB, process.execPath, __filename, 'child', 'client', ipA, '7443', dir],
    { env, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(client);
  const line = await lineFrom(client, (l) => l.startsWith('{'), 60_000);
  const result = JSON.parse(line);
  assert.deepStrictEqual(result, {
    wrongSecret: 'ERR_PROCWIRE_AUTH_FAILED', echoed: 10_000, bad: 0, replies: true, transport: 'tls',
  });
  assert.strictEqual(await rejected, 'reject ERR_PROCWIRE_AUTH_FAILED', 'the server refused the wrong secret and kept serving');
  // The hosts really are separate: B cannot see A's address as its own.
  assert.ok(!sh('ip', ['-n', nsB, 'addr']).includes(ipA));
});
