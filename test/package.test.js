'use strict';
// The packed package, installed the way users get it: `npm pack` (which runs
// scripts/prebuild.sh through "prepack"), then `npm install <tarball>` into a
// fresh project with no compiler on PATH (PATH holds only node and npm), on
// every supported Node line, and a fork round trip on each, which must use
// the prebuilt addon. Then the prebuilt binary of one line is removed and the
// same round trip must still work, through the pure-JS fallback.
//
// Slow (it builds and installs), so it runs once: on the machine's Node 20
// line of the suite (scripts/test.sh runs every file on 20, 22, 24 and 26).
//   PROCWIRE_PACK_TEST=0   skip it

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const ROOT = path.join(__dirname, '..');
const STEP_TIMEOUT = 10 * 60_000;

function skipReason() {
  if (process.env.PROCWIRE_PACK_TEST === '0') return 'PROCWIRE_PACK_TEST=0';
  if (!process.version.startsWith('v20')) {
    return `runs once per suite run, on the Node 20 line (this is ${process.version}); it installs on every line itself`;
  }
  if (process.platform !== 'linux' || process.arch !== 'x64') return 'prebuilds are made for linux-x64 only';
  return false;
}

function npmCli() {
  const candidates = [
    path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js'),
    '/usr/lib/node_modules/npm/bin/npm-cli.js',
    '/usr/local/lib/node_modules/npm/bin/npm-cli.js',
  ];
  return candidates.find((f) => fs.existsSync(f));
}

function run(file, args, options) {
  const t0 = process.hrtime.bigint();
  const r = childProcess.spawnSync(file, args, { encoding: 'utf8', timeout: STEP_TIMEOUT, maxBuffer: 64 << 20, ...options });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const text = `${r.stdout || ''}\n${r.stderr || ''}`;
  if (r.status !== 0) {
    throw new Error(`${path.basename(file)} ${args.join(' ')} failed (${r.error ? r.error.message : `exit ${r.status} ${r.signal || ''}`}):\n${text.slice(-4000)}`);
  }
  return { stdout: r.stdout, text, ms };
}

// The round trip each installed copy runs: a procwire child, a request, a
// Buffer both ways; prints what it saw as JSON.
const ROUND_TRIP = `
const procwire = require('procwire');
if (process.argv[2] === 'child') {
  procwire.parent.respond((v) => ({ echo: v, native: procwire.native }));
  procwire.parent.on('message', (m) => procwire.parent.send({ back: m }));
  return;
}
(async () => {
  const esm = await import('procwire');
  const child = procwire.fork(__filename, ['child'], { child: 'procwire', serialization: 'advanced' });
  const reply = await child.request({ buf: Buffer.from('hi') }, { timeout: 20000 });
  const back = await new Promise((resolve) => { child.once('message', resolve); child.send([1, 'two']); });
  child.disconnect();
  console.log(JSON.stringify({
    version: process.version, native: procwire.native, childNative: reply.native,
    buf: Buffer.isBuffer(reply.echo.buf) && reply.echo.buf.toString(), back: back.back,
    esm: typeof esm.fork === 'function' && esm.native === procwire.native,
  }));
})().catch((err) => { console.error(err); process.exit(1); });
`;

test('the packed tarball installs without a compiler and runs on every Node line', { skip: skipReason(), timeout: 40 * 60_000 }, async (t) => {
  const cli = npmCli();
  assert.ok(cli, 'npm-cli.js not found');
  const lines = [{ major: 20, node: process.execPath }];
  for (const major of [22, 24, 26]) {
    const node = path.join(ROOT, '.nodes', String(major), 'bin', 'node');
    if (fs.existsSync(node)) lines.push({ major, node });
    else t.diagnostic(`Node ${major}: ${node} missing (scripts/setup-nodes.sh installs it); not tested`);
  }
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-pack-'));
  t.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  // npm pack: prepack builds the prebuilt binaries, postpack removes them
  // from the working tree again.
  const env = { ...process.env };
  delete env.PROCWIRE_ADDON;
  delete env.PROCWIRE_FORCE_FALLBACK;
  const packed = run(process.execPath, [cli, 'pack', '--json', '--pack-destination', tmp], { cwd: ROOT, env });
  const info = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('[')))[0];
  const tarball = path.join(tmp, info.filename);
  const files = info.files.map((f) => f.path);
  t.diagnostic(`tarball ${info.filename}: ${info.size} bytes packed, ${info.unpackedSize} unpacked, ${files.length} files (npm pack incl. prebuild: ${Math.round(packed.ms)} ms)`);
  for (const { node } of lines) {
    const abi = run(node, ['-p', 'process.versions.modules']).stdout.trim();
    assert.ok(files.includes(`prebuilds/linux-x64/procwire.abi${abi}.node`), `no prebuild for ABI ${abi} in the tarball`);
  }
  for (const f of files) {
    assert.ok(!/^(test|build|\.build|\.nodes|bench-results|fuzz|node_modules)\//.test(f), `${f} must not be in the tarball`);
    assert.ok(!/\.(o|a|log|tgz)$/.test(f), `${f} must not be in the tarball`);
  }
  assert.ok(files.includes('scripts/install.js'));
  assert.ok(!fs.existsSync(path.join(ROOT, 'prebuilds')) || process.env.PROCWIRE_KEEP_PREBUILDS, 'postpack removes prebuilds/');

  const results = [];
  for (const { major, node } of lines) {
    // PATH with node and npm only: no cc, c++, gcc, g++, make, python.
    const shim = path.join(tmp, `bin-${major}`);
    fs.mkdirSync(shim);
    fs.symlinkSync(node, path.join(shim, 'node'));
    fs.writeFileSync(path.join(shim, 'npm'), `#!/bin/sh\nexec "${node}" "${cli}" "$@"\n`, { mode: 0o755 });
    // npm runs lifecycle scripts through sh.
    fs.symlinkSync('/bin/sh', path.join(shim, 'sh'));
    for (const tool of ['cc', 'c++', 'gcc', 'g++', 'make', 'clang']) {
      assert.ok(!fs.existsSync(path.join(shim, tool)), `${tool} on the test PATH`);
    }
    const project = path.join(tmp, `project-${major}`);
    fs.mkdirSync(project);
    fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: `pw-pack-${major}`, version: '1.0.0', private: true }));
    fs.writeFileSync(path.join(project, 'rt.js'), ROUND_TRIP);
    const lineEnv = { HOME: process.env.HOME, PATH: shim, TMPDIR: os.tmpdir() };
    // Optional dependencies (zeromq, a benchmark peer) are left out: they are
    // not procwire's install.
    const install = run(path.join(shim, 'npm'),
      ['install', tarball, '--no-audit', '--no-fund', '--prefer-offline', '--omit=optional', '--foreground-scripts'],
      { cwd: project, env: lineEnv });
    assert.match(install.text, /using the prebuilt addon/, `Node ${major}: install did not use the prebuild`);
    const out = JSON.parse(run(node, ['rt.js'], { cwd: project, env: lineEnv }).stdout.trim().split('\n').pop());
    t.diagnostic(`Node ${major} (${out.version}): npm install ${Math.round(install.ms)} ms, native ${out.native}`);
    results.push({ major, installMs: Math.round(install.ms), ...out });
    assert.deepStrictEqual({ native: out.native, childNative: out.childNative, buf: out.buf, back: out.back, esm: out.esm },
      { native: true, childNative: true, buf: 'hi', back: [1, 'two'], esm: true }, `Node ${major}`);
  }

  // Without a prebuilt binary for its line (and no compiler to build one),
  // the same package works through the JS fallback.
  const last = lines[lines.length - 1];
  const project = path.join(tmp, `project-${last.major}`);
  const abi = run(last.node, ['-p', 'process.versions.modules']).stdout.trim();
  fs.rmSync(path.join(project, 'node_modules', 'procwire', 'prebuilds', 'linux-x64', `procwire.abi${abi}.node`));
  const r = run(last.node, ['rt.js'], { cwd: project, env: { HOME: process.env.HOME, PATH: path.join(tmp, `bin-${last.major}`) } });
  const out = JSON.parse(r.stdout.trim().split('\n').pop());
  assert.deepStrictEqual({ native: out.native, childNative: out.childNative, buf: out.buf, back: out.back },
    { native: false, childNative: false, buf: 'hi', back: [1, 'two'] }, `Node ${last.major} without its prebuild`);
  assert.match(r.text, /PROCWIRE_FALLBACK/, 'the fallback says so');
  t.diagnostic(`Node ${last.major} without its prebuild: fallback in use (native ${out.native})`);
});
