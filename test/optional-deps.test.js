'use strict';
// Optional peers stay optional: without a NATS client installed, procwire
// loads and works, and only a NATS channel fails, with a coded error that
// names the package to install; with the maintained client but without
// @nats-io/jetstream, only durable channels fail, naming that package.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');

const root = path.join(__dirname, '..');
const pkg = require('../package.json');
const V3 = '@nats-io/transport-node';
const JS = '@nats-io/jetstream';

test('the NATS clients are optional peer dependencies, zeromq no dependency at all', () => {
  assert.strictEqual(pkg.dependencies, undefined, 'procwire has no runtime dependencies');
  for (const name of [V3, JS, 'nats']) {
    assert.strictEqual(pkg.peerDependencies[name], pkg.devDependencies[name], `tests use the peer range of ${name}`);
    assert.deepStrictEqual(pkg.peerDependenciesMeta[name], { optional: true }, name);
  }
  for (const field of ['dependencies', 'optionalDependencies', 'peerDependencies', 'devDependencies']) {
    assert.ok(!(pkg[field] && pkg[field].zeromq), `zeromq in ${field}`);
  }
});

// A copy of the package in a temporary directory, where no node_modules can
// be found above it but the packages named in `installed` (copied beside it).
function isolatedCopy(t, installed) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-nonats-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const copy = path.join(dir, 'procwire');
  fs.cpSync(path.join(root, 'lib'), path.join(copy, 'lib'), { recursive: true });
  fs.copyFileSync(path.join(root, 'package.json'), path.join(copy, 'package.json'));
  for (const name of installed) {
    fs.cpSync(path.join(root, 'node_modules', name), path.join(dir, 'node_modules', name), { recursive: true });
  }
  return { dir, copy };
}

function run(dir, copy, body) {
  const { addonFile: file } = require('../lib/native');
  const env = { ...process.env, NODE_PATH: '' };
  if (file) env.PROCWIRE_ADDON = file;
  const script = `
    const procwire = require(${JSON.stringify(copy)});
    const out = {};
    const coded = (err) => ({ code: err.code, message: err.message });
    (async () => { ${body} })().then(() => process.stdout.write(JSON.stringify(out)));`;
  return JSON.parse(execFileSync(process.execPath, ['-e', script], { cwd: dir, env, encoding: 'utf8', timeout: 20_000 }));
}

test('without a NATS client, procwire works and a NATS channel says what to install', { timeout: 30_000 }, (t) => {
  const { dir, copy } = isolatedCopy(t, []);
  const out = run(dir, copy, `
    const frame = procwire.codec.advanced.encode({ ok: 1 });
    out.codec = procwire.codec.advanced.decode(frame.subarray(4)).ok;
    await procwire.connect('nats://127.0.0.1:4222', { subject: 'jobs' }).then(() => { out.connect = 'resolved'; }, (err) => { out.connect = coded(err); });
    await procwire.connect('nats://127.0.0.1:4222', { subject: 'jobs', durable: true }).then(() => { out.durable = 'resolved'; }, (err) => { out.durable = coded(err); });
    await procwire.connect('nats://127.0.0.1:4222', { subject: 'jobs', natsClient: 'nats' }).then(() => { out.v2 = 'resolved'; }, (err) => { out.v2 = coded(err); });
    await procwire.listen('nats://127.0.0.1:4222', { subject: 'jobs' }).ready.then(() => { out.listen = 'resolved'; }, (err) => { out.listen = err.code; });`);
  assert.strictEqual(out.codec, 1);
  assert.strictEqual(out.connect.code, 'ERR_PROCWIRE_NATS');
  assert.match(out.connect.message, /npm install @nats-io\/transport-node/);
  assert.strictEqual(out.durable.code, 'ERR_PROCWIRE_NATS');
  assert.match(out.durable.message, /npm install @nats-io\/transport-node/);
  assert.strictEqual(out.v2.code, 'ERR_PROCWIRE_NATS');
  assert.match(out.v2.message, /npm install nats/);
  assert.strictEqual(out.listen, 'ERR_PROCWIRE_NATS');
});

test('with the maintained client but not @nats-io/jetstream, a durable channel says to install it', { timeout: 30_000 }, (t) => {
  const deps = fs.readdirSync(path.join(root, 'node_modules', '@nats-io')).filter((n) => n !== 'jetstream').map((n) => `@nats-io/${n}`);
  const { dir, copy } = isolatedCopy(t, deps);
  const out = run(dir, copy, `
    await procwire.connect('nats://127.0.0.1:4222', { subject: 'jobs', durable: true }).then(() => { out.durable = 'resolved'; }, (err) => { out.durable = coded(err); });
    await procwire.listen('nats://127.0.0.1:4222', { subject: 'jobs', durable: true }).ready.then(() => { out.listen = 'resolved'; }, (err) => { out.listen = coded(err); });`);
  assert.strictEqual(out.durable.code, 'ERR_PROCWIRE_NATS');
  assert.match(out.durable.message, /npm install @nats-io\/jetstream/);
  assert.strictEqual(out.listen.code, 'ERR_PROCWIRE_NATS');
  assert.match(out.listen.message, /npm install @nats-io\/jetstream/);
});
