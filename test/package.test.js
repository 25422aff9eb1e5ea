'use strict';
// The packed package, installed the way users get it: `npm pack` (which runs
// scripts/prebuild.sh through "prepack"), then `npm install <tarball>` into a
// fresh project with no compiler on PATH (PATH holds only node and npm), on
// every supported Node line, and a fork round trip on each, which must use
// the prebuilt addon. On each line the parent's first fork and a native
// child must start from the start bundles the package ships
// (prebuilds/start/), with that line's code caches, and, once a bundled
// file is patched in node_modules, from lib/ instead. Then the prebuilt
// binary of one line is removed and the same round trip must still work,
// through the pure-JS fallback.
//
// Every shipped binary (linux-x64 and linux-arm64) must need no glibc symbol
// version newer than GLIBC_2.28 and no libstdc++ at all (objdump -T), and
// the arm64 one passes the fork round trip under qemu-user with the npm
// registry's arm64 node (scripts/setup-toolchain.sh installs both). A
// package whose build fails without a compiler says so in one line.
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
// Time for all the steps of one test. The tests block on their child
// processes, so node:test cannot end them at their own limit: run() gives
// each step what is left of its test's budget. The install test takes about
// a minute here, the clone test less; together the budgets stay inside the
// 600 s scripts/test.sh gives this file. Their cold work (the zig toolchain,
// the other Node lines' headers, eight cross-built addons, npm 11 and pnpm
// 10) is done and cached before, by scripts/test.sh's "caches" step with a
// budget of its own: a cold machine spent more than 330 s there, inside
// this test, and ran out.
const INSTALL_BUDGET = 390_000;
const CLONE_BUDGET = 150_000;
let deadline = Infinity;

// Starts the budget of the steps that follow.
function budget(ms) {
  deadline = Date.now() + ms;
}
// The arm64 Node line the qemu round trip runs on (one line keeps the
// download and the emulated run short).
const ARM64_NODE = process.env.PROCWIRE_ARM64_NODE || '20';

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

const MAX_GLIBC = '2.28';

function versionLess(a, b) {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    if ((pa[i] || 0) !== (pb[i] || 0)) return (pa[i] || 0) < (pb[i] || 0);
  }
  return false;
}

// The symbol versions a binary needs from glibc and the C++ runtime.
function symbolVersions(file) {
  const text = childProcess.execFileSync('objdump', ['-T', file], { encoding: 'utf8', maxBuffer: 64 << 20 });
  const glibc = [...new Set([...text.matchAll(/\(GLIBC_([0-9.]+)\)/g)].map((m) => m[1]))];
  const cxx = [...new Set([...text.matchAll(/\((GLIBCXX|CXXABI)_[0-9.]+\)/g)].map((m) => m[0]))];
  return { glibc, newest: glibc.reduce((a, b) => (versionLess(a, b) ? b : a), '0'), cxx };
}

function run(file, args, options) {
  const left = deadline - Date.now();
  if (left <= 0) throw new Error(`out of time before ${path.basename(file)} ${args.join(' ')}`);
  const t0 = process.hrtime.bigint();
  const r = childProcess.spawnSync(file, args, {
    encoding: 'utf8', timeout: left, maxBuffer: 64 << 20, ...options,
  });
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
  procwire.parent.respond((v) => ({ echo: v, native: procwire.native, arch: process.arch }));
  procwire.parent.on('message', (m) => procwire.parent.send({ back: m }));
  return;
}
(async () => {
  const esm = await import('procwire');
  // Under qemu-user without binfmt_misc the child must be started through
  // the same wrapper as this process.
  const child = procwire.fork(__filename, ['child'], { child: 'procwire', serialization: 'advanced', execPath: process.env.RT_EXEC_PATH || process.execPath });
  const reply = await child.request({ buf: Buffer.from('hi') }, { timeout: 20000 });
  const back = await new Promise((resolve) => { child.once('message', resolve); child.send([1, 'two']); });
  child.disconnect();
  console.log(JSON.stringify({
    version: process.version, arch: process.arch, native: procwire.native, childNative: reply.native, childArch: reply.arch,
    buf: Buffer.isBuffer(reply.echo.buf) && reply.echo.buf.toString(), back: back.back,
    esm: typeof esm.fork === 'function' && esm.native === procwire.native,
  }));
})().catch((err) => { console.error(err); process.exit(1); });
`;

// How an installed copy starts, as its lib/start-bundle.js tells (see
// test/child-start.test.js and test/parent-start.test.js): the parent's
// start bundle (require('procwire') and its first fork) and a native child's,
// each with its code cache file and whether V8 took it, and whether the
// marker a test's edit of a bundled file puts in lib/errors.js ran there.
const BUNDLE_CHECK = `
const path = require('path');
const starter = path.join(path.dirname(require.resolve('procwire/package.json')), 'lib', 'start-bundle.js');
if (process.argv[2] === 'child') {
  process.once('message', () => {
    const loaded = require.cache[starter];
    process.send({ started: loaded === undefined ? null : loaded.exports.childStarted, patched: globalThis.PROCWIRE_PATCHED === true });
  });
  return;
}
const procwire = require('procwire');
const parent = require.cache[starter].exports.parentBundleState();
// A native child, also under qemu, where execPath (the wrapper) would make it
// keep Node's own IPC by default.
const child = procwire.fork(__filename, ['child'], { child: 'native', execPath: process.env.RT_EXEC_PATH || process.execPath });
child.once('message', (answer) => {
  console.log(JSON.stringify({ parent, patched: globalThis.PROCWIRE_PATCHED === true, child: answer }));
  child.kill();
});
child.send(0);
`;

// Runs BUNDLE_CHECK in project; returns what it saw.
function bundleCheck(node, project, env) {
  fs.writeFileSync(path.join(project, 'bundle-check.js'), BUNDLE_CHECK);
  return JSON.parse(run(node, ['bundle-check.js'], { cwd: project, env }).stdout.trim().split('\n').pop());
}

// That an installed copy's parent and native child both started from the
// shipped bundles (prebuilds/start/ of the installed package), with the code
// cache made for this Node line, which V8 took.
function assertShippedBundles(seen, pkgDir, what) {
  const shipped = path.join(fs.realpathSync(pkgDir), 'prebuilds', 'start') + path.sep;
  for (const [side, state] of [['parent', seen.parent], ['child', seen.child.started]]) {
    assert.ok(state !== null && state.cacheFile !== null, `${what}: the ${side} did not start from a bundle: ${JSON.stringify(seen)}`);
    assert.ok(state.cacheFile.startsWith(shipped), `${what}: the ${side} started from ${state.cacheFile}, not from ${shipped}`);
    assert.strictEqual(state.cacheUsed, true, `${what}: V8 did not take the ${side}'s shipped code cache ${state.cacheFile}`);
  }
}

// Edits a bundled file of an installed copy the way patch-package would, but
// keeping its size (one comment line becomes a line that sets a marker), so
// a check of sizes alone would not see it.
function patchKeepingSize(file) {
  const text = fs.readFileSync(file, 'latin1');
  const line = text.split('\n').find((l) => /^\/\/[ -~]{40,}$/.test(l));
  assert.ok(line, `no plain comment line to patch in ${file}`);
  const marker = 'globalThis.PROCWIRE_PATCHED = true; //';
  const patched = text.replace(line, marker + '-'.repeat(line.length - marker.length));
  fs.writeFileSync(file, patched, 'latin1');
  assert.strictEqual(fs.statSync(file).size, Buffer.byteLength(text, 'latin1'));
}

test('the packed tarball installs without a compiler and runs on every Node line', { skip: skipReason(), timeout: INSTALL_BUDGET + 30_000 }, async (t) => {
  budget(INSTALL_BUDGET);
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
    for (const arch of ['x64', 'arm64']) {
      assert.ok(files.includes(`prebuilds/linux-${arch}/procwire.abi${abi}.node`), `no linux-${arch} prebuild for ABI ${abi} in the tarball`);
    }
  }

  // Every shipped binary loads on glibc 2.28 and needs no libstdc++.
  const unpacked = path.join(tmp, 'unpacked');
  fs.mkdirSync(unpacked);
  run('tar', ['-xzf', tarball, '-C', unpacked]);
  const binaries = files.filter((f) => f.endsWith('.node'));
  for (const f of binaries) {
    const v = symbolVersions(path.join(unpacked, 'package', f));
    assert.ok(!versionLess(MAX_GLIBC, v.newest), `${f} needs GLIBC_${v.newest} (at most ${MAX_GLIBC}): ${v.glibc.join(', ')}`);
    assert.deepStrictEqual(v.cxx, [], `${f} needs the C++ runtime's symbol versions`);
  }
  t.diagnostic(`${binaries.length} binaries, newest glibc symbol version needed: ` +
    `${binaries.map((f) => symbolVersions(path.join(unpacked, 'package', f)).newest).reduce((a, b) => (versionLess(a, b) ? b : a), '0')}`);
  for (const f of files) {
    assert.ok(!/^(test|build|\.build|\.nodes|bench-results|fuzz|node_modules)\//.test(f), `${f} must not be in the tarball`);
    assert.ok(!/\.(o|a|log|tgz)$/.test(f), `${f} must not be in the tarball`);
  }
  assert.ok(files.includes('scripts/install.js'));
  // A stamp of the bundles' files names the packing machine's inodes and
  // times (lib/start-bundle.js): it must not ship.
  assert.ok(!files.includes('prebuilds/start/start-stamp.json'), 'prebuilds/start/start-stamp.json must not be in the tarball');
  // The start bundles, and each line's code caches for them (linux-x64).
  for (const name of ['child-start', 'parent-start']) {
    for (const f of [`prebuilds/start/${name}-bundle.js`, `prebuilds/start/${name}.json`]) assert.ok(files.includes(f), `${f} is not in the tarball`);
    for (const { node } of lines) {
      const version = run(node, ['-p', 'process.version']).stdout.trim();
      assert.ok(files.some((f) => f.startsWith(`prebuilds/start/${name}-`) && f.endsWith(`-${version}-x64.cache`)),
        `no ${name} code cache for Node ${version} in the tarball`);
    }
  }
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
    // An empty user npmrc: the machine's own settings (a nodedir, say) make
    // npm warn about them, which is not procwire's install talking.
    fs.writeFileSync(path.join(tmp, 'npmrc'), '');
    const lineEnv = {
      HOME: process.env.HOME, PATH: shim, TMPDIR: os.tmpdir(), npm_config_userconfig: path.join(tmp, 'npmrc'),
      npm_config_update_notifier: 'false',
    };
    // Optional dependencies (zeromq, a benchmark peer) are left out: they are
    // not procwire's install.
    const install = run(path.join(shim, 'npm'),
      ['install', tarball, '--no-audit', '--no-fund', '--prefer-offline', '--omit=optional', '--foreground-scripts'],
      { cwd: project, env: lineEnv });
    // No install script: nothing to warn about, and the prebuilt addon loads at run time.
    assert.doesNotMatch(install.text, /warn|install-scripts|ignored build scripts/i, `Node ${major}: npm install said:\n${install.text}`);
    const out = JSON.parse(run(node, ['rt.js'], { cwd: project, env: lineEnv }).stdout.trim().split('\n').pop());
    t.diagnostic(`Node ${major} (${out.version}): npm install ${Math.round(install.ms)} ms, native ${out.native}`);
    results.push({ major, installMs: Math.round(install.ms), ...out });
    assert.deepStrictEqual({ native: out.native, childNative: out.childNative, buf: out.buf, back: out.back, esm: out.esm },
      { native: true, childNative: true, buf: 'hi', back: [1, 'two'], esm: true }, `Node ${major}`);
    const seen = bundleCheck(node, project, lineEnv);
    assertShippedBundles(seen, path.join(project, 'node_modules', 'procwire'), `Node ${major}`);
    assert.deepStrictEqual([seen.patched, seen.child.patched], [false, false]);
  }
  t.diagnostic('every line: the parent and a native child start from the shipped bundles, with their code caches');

  // A bundled file patched in the installed copy (its size kept): neither
  // the parent nor the child uses a bundle any more, and both run the
  // patched file from lib/.
  {
    const { major, node } = lines[0];
    const project = path.join(tmp, `project-${major}`);
    const pkgDir = path.join(project, 'node_modules', 'procwire');
    for (const name of ['child-start', 'parent-start']) {
      const manifest = JSON.parse(fs.readFileSync(path.join(pkgDir, 'prebuilds', 'start', `${name}.json`), 'utf8'));
      assert.ok(Object.hasOwn(manifest.sources, 'lib/errors.js'), `lib/errors.js is not in the ${name} bundle`);
    }
    patchKeepingSize(path.join(pkgDir, 'lib', 'errors.js'));
    const seen = bundleCheck(node, project, { HOME: process.env.HOME, PATH: path.join(tmp, `bin-${major}`) });
    assert.deepStrictEqual(seen, { parent: null, patched: true, child: { started: null, patched: true } },
      `Node ${major}: a patched lib/errors.js`);
    t.diagnostic(`Node ${major}, lib/errors.js patched in node_modules (same size): parent and child load lib/, the patch runs`);
  }

  // npm 11 (which warns about every dependency's install script) and pnpm
  // 10 (which skips them, and says so): both install the tarball without a
  // word and get the native addon. Run through npm exec from npm's cache.
  const first = lines[0];
  for (const [tool, args] of [['npm@11', ['install', tarball, '--no-audit', '--no-fund', '--omit=optional']],
    ['pnpm@10', ['add', tarball]]]) {
    const project = path.join(tmp, `project-${tool.replace('@', '')}`);
    fs.mkdirSync(project);
    fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'pw-pack-tools', version: '1.0.0', private: true }));
    fs.writeFileSync(path.join(project, 'rt.js'), ROUND_TRIP);
    const env = {
      HOME: process.env.HOME, PATH: path.join(tmp, `bin-${first.major}`), TMPDIR: os.tmpdir(),
      npm_config_userconfig: path.join(tmp, 'npmrc'), npm_config_update_notifier: 'false',
    };
    const name = tool.split('@')[0];
    const installed = run(first.node, [cli, 'exec', '--yes', `--package=${tool}`, '--', name, ...args], { cwd: project, env });
    assert.doesNotMatch(installed.text, /warn|install-scripts|ignored build scripts/i, `${tool} said:\n${installed.text}`);
    const out = JSON.parse(run(first.node, ['rt.js'], { cwd: project, env }).stdout.trim().split('\n').pop());
    assert.deepStrictEqual({ native: out.native, childNative: out.childNative, buf: out.buf },
      { native: true, childNative: true, buf: 'hi' }, tool);
    assertShippedBundles(bundleCheck(first.node, project, env), path.join(project, 'node_modules', 'procwire'), tool);
    t.diagnostic(`${tool} (${name} ${args[0]}): ${Math.round(installed.ms)} ms, no warning, native ${out.native}`);
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

  // The install hook on that line, with no prebuilt binary for it: one line,
  // whether there is no compiler at all or the source build fails.
  const pkgDir = path.join(project, 'node_modules', 'procwire');
  const installJs = path.join(pkgDir, 'scripts', 'install.js');
  const noCompiler = run(last.node, [installJs], { cwd: pkgDir, env: { HOME: process.env.HOME, PATH: path.join(tmp, `bin-${last.major}`) } });
  const said = noCompiler.text.split('\n').filter((l) => l.trim());
  assert.strictEqual(said.length, 1, `one line, got:\n${noCompiler.text}`);
  assert.match(said[0], /^procwire: no prebuilt addon for linux-x64 Node .* and no C\+\+ compiler\/make to build one; procwire will use its pure-JavaScript fallback/);
  const tools = ['c++', 'make'].map((tool) => [tool, ['/usr/bin', '/usr/local/bin'].map((d) => path.join(d, tool)).find((f) => fs.existsSync(f))]);
  const gyp = path.join(path.dirname(cli), '..', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js');
  if (tools.every(([, f]) => f) && fs.existsSync(gyp)) {
    // A compiler but no Python: node-gyp fails (its configured Python is
    // checked alone, so it never searches further or downloads anything).
    const shim = path.join(tmp, 'bin-compiler');
    fs.mkdirSync(shim);
    for (const [tool, f] of tools) fs.symlinkSync(f, path.join(shim, tool));
    fs.symlinkSync(last.node, path.join(shim, 'node'));
    fs.symlinkSync('/bin/sh', path.join(shim, 'sh'));
    const failed = run(last.node, [installJs], {
      cwd: pkgDir,
      env: { HOME: process.env.HOME, PATH: shim, npm_config_node_gyp: gyp, npm_config_python: path.join(tmp, 'no-python3') },
    });
    const lines1 = failed.text.split('\n').filter((l) => l.trim());
    assert.strictEqual(lines1.length, 1, `one line, got:\n${failed.text}`);
    assert.doesNotMatch(failed.text, /gyp ERR!/);
    const m = /^procwire: no prebuilt addon .* and the source build failed \(node-gyp exited with 1; log: (.+)\); procwire will use its pure-JavaScript fallback/.exec(lines1[0]);
    assert.ok(m, lines1[0]);
    assert.match(fs.readFileSync(m[1], 'utf8'), /gyp ERR!/);
    t.diagnostic(`install without its prebuild: "${said[0]}" / "${lines1[0]}"`);
  } else {
    t.diagnostic('no c++/make on this machine: the failing source build case is not tested');
  }

  // linux-arm64: the binary from the tarball, in the npm registry's arm64
  // node under qemu-user, a fork round trip whose child runs there too.
  const arm = run('bash', [path.join(ROOT, 'scripts', 'setup-toolchain.sh'), 'arm64', ARM64_NODE], { cwd: ROOT, env });
  t.diagnostic(`arm64 toolchain and node ${ARM64_NODE}: ${Math.round(arm.ms)} ms`);
  const runNode = path.join(ROOT, '.toolchain', 'node-arm64', ARM64_NODE, 'run-node');
  const armProject = path.join(tmp, 'project-arm64');
  const armPkg = path.join(armProject, 'node_modules', 'procwire');
  fs.mkdirSync(armPkg, { recursive: true });
  run('tar', ['-xzf', tarball, '-C', armPkg, '--strip-components=1']);
  fs.writeFileSync(path.join(armProject, 'rt.js'), ROUND_TRIP);
  // Its JavaScript dependencies are the same on every CPU.
  const armEnv = { HOME: process.env.HOME, PATH: process.env.PATH, NODE_PATH: path.join(ROOT, 'node_modules'), RT_EXEC_PATH: runNode };
  const armInstall = run(runNode, [path.join(armPkg, 'scripts', 'install.js')], { cwd: armPkg, env: armEnv });
  assert.match(armInstall.text, /using the prebuilt addon .*prebuilds\/linux-arm64\//, armInstall.text);
  const armRt = run(runNode, ['rt.js'], { cwd: armProject, env: armEnv });
  const armOut = JSON.parse(armRt.stdout.trim().split('\n').pop());
  assert.deepStrictEqual({ arch: armOut.arch, childArch: armOut.childArch, native: armOut.native, childNative: armOut.childNative, buf: armOut.buf, back: armOut.back },
    { arch: 'arm64', childArch: 'arm64', native: true, childNative: true, buf: 'hi', back: [1, 'two'] }, 'arm64 under qemu');
  t.diagnostic(`arm64 Node ${armOut.version} under qemu: fork round trip with the prebuilt addon in ${Math.round(armRt.ms)} ms`);
  // The package has code caches for x64 only. An x64 cache taken on arm64
  // crashed Node 20.20.2 there (V8 did not refuse it), so the parent and a
  // native child start from the bundles without a cache, and do not crash
  // (the qemu Node is the release the x64 caches were made with, usually).
  const armSeen = bundleCheck(runNode, armProject, armEnv);
  for (const [side, state] of [['parent', armSeen.parent], ['child', armSeen.child.started]]) {
    assert.ok(state !== null && state.cacheFile.endsWith(`-${armOut.version}-arm64.cache`) && state.cacheUsed === false,
      `arm64 ${side}: ${JSON.stringify(state)}`);
  }
});

// `npm pack --pack-destination DIR` in a fresh clone: npm hands its settings
// (the destination among them) to the prepack script, whose own download of
// another Node line's headers must still land where it looks for them. One
// line and one CPU keep the build short; the clone shares this checkout's
// installed toolchain.
test('npm pack --pack-destination works in a fresh clone', { skip: skipReason(), timeout: CLONE_BUDGET + 30_000 }, (t) => {
  budget(CLONE_BUDGET);
  const cli = npmCli();
  assert.ok(cli, 'npm-cli.js not found');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-clone-'));
  t.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const clone = path.join(tmp, 'clone');
  run('git', ['clone', '-q', '--no-hardlinks', ROOT, clone]);
  // This checkout's uncommitted scripts are what is under test.
  for (const f of ['scripts/prebuild.sh', 'scripts/setup-toolchain.sh', 'scripts/setup-nodes.sh', 'package.json',
    'scripts/postpack.js', 'scripts/expected-prebuilds.js', 'scripts/build-start-bundle.js', 'lib/start-bundle.js']) {
    fs.copyFileSync(path.join(ROOT, f), path.join(clone, f));
  }
  run('bash', [path.join(ROOT, 'scripts', 'setup-toolchain.sh')], { cwd: ROOT });
  fs.symlinkSync(path.join(ROOT, '.toolchain'), path.join(clone, '.toolchain'));
  assert.ok(!fs.existsSync(path.join(clone, '.nodes')), 'a fresh clone has no other Node lines');
  const dest = path.join(tmp, 'dest');
  fs.mkdirSync(dest);
  const env = { ...process.env, PROCWIRE_PREBUILD_NODES: '22', PROCWIRE_PREBUILD_ARCHS: 'x64' };
  delete env.PROCWIRE_ADDON;
  const packed = run(process.execPath, [cli, 'pack', '--json', '--pack-destination', dest], { cwd: clone, env });
  const info = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('[')))[0];
  assert.deepStrictEqual(fs.readdirSync(dest), [info.filename], 'only the package lands in the destination');
  const abi = run(path.join(clone, '.nodes', '22', 'bin', 'node'), ['-p', 'process.versions.modules']).stdout.trim();
  assert.ok(info.files.some((f) => f.path === `prebuilds/linux-x64/procwire.abi${abi}.node`), 'the Node 22 prebuild is packed');
  const version = run(path.join(clone, '.nodes', '22', 'bin', 'node'), ['-p', 'process.version']).stdout.trim();
  for (const name of ['child-start', 'parent-start']) {
    assert.ok(info.files.some((f) => f.path === `prebuilds/start/${name}-bundle.js`), `the ${name} bundle is packed`);
    assert.ok(info.files.some((f) => f.path.startsWith(`prebuilds/start/${name}-`) && f.path.endsWith(`-${version}-x64.cache`)),
      `the ${name} bundle's Node 22 code cache is packed`);
  }
  assert.ok(!fs.existsSync(path.join(clone, 'prebuilds')), 'postpack removes prebuilds/, the start bundles with it');
  t.diagnostic(`fresh clone: npm pack --pack-destination incl. Node 22 download and build: ${Math.round(packed.ms)} ms`);

  // Packing refuses a tarball without every addon it must ship: the same
  // postpack check, asked for one more line than was built, deletes the
  // tarball and fails, naming what is missing.
  const refused = childProcess.spawnSync(process.execPath, [path.join(clone, 'scripts', 'postpack.js')], {
    cwd: clone, encoding: 'utf8', timeout: 30_000,
    env: { ...env, npm_config_pack_destination: dest, PROCWIRE_PREBUILD_NODES: '22 24' },
  });
  assert.strictEqual(refused.status, 1, refused.stderr);
  assert.match(refused.stderr, /refusing the package: .*lacks prebuilds\/linux-x64\/procwire\.abi137\.node/);
  assert.deepStrictEqual(fs.readdirSync(dest), [], 'the incomplete tarball is deleted');
});
