'use strict';
// Optional peers stay optional: without the nats package installed, procwire
// loads and works, and only a NATS channel fails, with a coded error that
// says what to install.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');

const root = path.join(__dirname, '..');
const pkg = require('../package.json');

test('nats is an optional peer dependency, zeromq no dependency at all', () => {
  assert.strictEqual(pkg.dependencies, undefined, 'procwire has no runtime dependencies');
  assert.strictEqual(pkg.peerDependencies.nats, pkg.devDependencies.nats, 'tests use the peer range');
  assert.deepStrictEqual(pkg.peerDependenciesMeta.nats, { optional: true });
  for (const field of ['dependencies', 'optionalDependencies', 'peerDependencies', 'devDependencies']) {
    assert.ok(!(pkg[field] && pkg[field].zeromq), `zeromq in ${field}`);
  }
});

test('without nats installed, procwire works and a NATS channel says to install it', { timeout: 30_000 }, (t) => {
  // A copy of the package where no node_modules can be found above it.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-nonats-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const copy = path.join(dir, 'procwire');
  fs.cpSync(path.join(root, 'lib'), path.join(copy, 'lib'), { recursive: true });
  fs.copyFileSync(path.join(root, 'package.json'), path.join(copy, 'package.json'));
  const { addonFile: file } = require('../lib/native');
  const env = { ...process.env, NODE_PATH: '' };
  if (file) env.PROCWIRE_ADDON = file;
  const script = `
    const procwire = require(${JSON.stringify(copy)});
    const frame = procwire.codec.advanced.encode({ ok: 1 });
    const out = { codec: procwire.codec.advanced.decode(frame.subarray(4)).ok };
    procwire.connect('nats://127.0.0.1:4222', { subject: 'jobs' }).then(
      () => { out.connect = 'resolved'; },
      (err) => { out.connect = { code: err.code, message: err.message }; })
      .then(() => procwire.listen('nats://127.0.0.1:4222', { subject: 'jobs' }).ready)
      .then(() => { out.listen = 'resolved'; }, (err) => { out.listen = err.code; })
      .then(() => process.stdout.write(JSON.stringify(out)));`;
  const out = JSON.parse(execFileSync(process.execPath, ['-e', script], { cwd: dir, env, encoding: 'utf8', timeout: 20_000 }));
  assert.strictEqual(out.codec, 1);
  assert.strictEqual(out.connect.code, 'ERR_PROCWIRE_NATS');
  assert.match(out.connect.message, /npm install nats/);
  assert.strictEqual(out.listen, 'ERR_PROCWIRE_NATS');
});
