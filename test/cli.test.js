'use strict';
// The `procwire` command line (bin/procwire.js, bench/lib/cli.js) as a user
// meets it: --version and --help, unknown commands and bad option values
// (exit status 2, nothing run), plain progress lines when stderr is not a
// terminal, a bench run from an installed copy of the package (no "not
// pinned" warning, no hint at a script the package does not ship), the TLS
// row's certificate without an openssl binary, and `procwire report`.

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const ROOT = path.join(__dirname, '..');
const BIN = path.join(ROOT, 'bin', 'procwire.js');
const pkg = require('../package.json');

function run(args, { cwd = ROOT, env = process.env, file = BIN, timeout = 60_000 } = {}) {
  const r = childProcess.spawnSync(process.execPath, [file, ...args], { cwd, env, encoding: 'utf8', timeout });
  assert.ok(!r.error, `procwire ${args.join(' ')}: ${r.error && r.error.message}`);
  return r;
}

function tmpDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-cli-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// The environment a user's shell would give: none of this worktree's
// overrides.
function cleanEnv(extra = {}) {
  const env = { ...process.env, ...extra };
  delete env.PROCWIRE_ADDON;
  delete env.PROCWIRE_FORCE_FALLBACK;
  return env;
}

test('--version prints the package version', () => {
  for (const flag of ['--version', '-v']) {
    const r = run([flag]);
    assert.strictEqual(r.status, 0, r.stderr);
    assert.strictEqual(r.stdout, `${pkg.version}\n`);
  }
});

test('--help and no command print the usage with every command, exit 0', () => {
  for (const args of [['--help'], ['-h'], ['help'], []]) {
    const r = run(args);
    assert.strictEqual(r.status, 0, r.stderr);
    for (const word of ['procwire bench', 'procwire report', 'procwire stats', '--version']) {
      assert.ok(r.stdout.includes(word), `${args.join(' ') || '(none)'}: usage lacks ${word}`);
    }
  }
  const r = run(['bench', '--help']);
  assert.strictEqual(r.status, 0, r.stderr);
  assert.match(r.stdout, /--repeats n/);
});

test('an unknown command or option is called unknown, exit 2, usage on stderr', () => {
  const cases = [
    [['frobnicate'], /procwire: unknown command "frobnicate"/],
    [['--frob'], /procwire: unknown option "--frob"/],
    [['bench', '--bogus'], /procwire: .*'--bogus'/],
  ];
  for (const [args, want] of cases) {
    const r = run(args);
    assert.strictEqual(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, want);
    assert.match(r.stderr, /usage:/);
    assert.strictEqual(r.stdout, '');
  }
});

test('bad option values are errors before anything runs', () => {
  const cases = [
    [['bench', '--repeats', 'abc'], /--repeats must be a whole number from 1 to 1000 \(got "abc"\)/],
    [['bench', '--repeats=0'], /--repeats must be a whole number.*got "0"/],
    [['bench', '--repeats', '2.5'], /--repeats must be a whole number.*got "2.5"/],
    [['bench', '--workers', '-3'], /--workers/],
    [['bench', '--concurrency', '1e3'], /--concurrency must be a whole number/],
    [['bench', '--suite', 'codec,nope'], /unknown suite "nope"/],
    [['bench', '--repeats'], /--repeats/],
    [['bench', 'extra'], /extra/],
    [['stats'], /stats needs a results.json/],
    [['report'], /report takes one results.json/],
  ];
  for (const [args, want] of cases) {
    const t0 = Date.now();
    const r = run(args);
    assert.strictEqual(r.status, 2, `${args.join(' ')}: exit ${r.status}: ${r.stderr}`);
    assert.match(r.stderr, want, args.join(' '));
    // Rejected at once, not after a benchmark run.
    assert.ok(Date.now() - t0 < 20_000, `${args.join(' ')} took ${Date.now() - t0} ms`);
  }
  // A suite script run on its own checks its options too.
  const r = run(['--repeats', 'abc'], { file: path.join(ROOT, 'bench', 'codec.js') });
  assert.strictEqual(r.status, 2, r.stderr);
  assert.match(r.stderr, /--repeats must be a whole number/);
});

test('a file that is not a results file is a clear error, exit 1', (t) => {
  const dir = tmpDir(t);
  fs.writeFileSync(path.join(dir, 'results.json'), '{"hello": 1}');
  for (const cmd of ['stats', 'report']) {
    const r = run([cmd, dir]);
    assert.strictEqual(r.status, 1, r.stderr);
    assert.match(r.stderr, /not a procwire bench results file/);
    const missing = run([cmd, path.join(dir, 'nope.json')]);
    assert.strictEqual(missing.status, 1, missing.stderr);
    assert.match(missing.stderr, /cannot read .*nope\.json: no such file/);
  }
});

test('off a terminal a bench run prints plain progress lines, and report re-renders it', { timeout: 240_000 }, (t) => {
  const dir = tmpDir(t);
  const out = path.join(dir, 'run');
  const r = run(['bench', '--quick', '--suite', 'codec', '--repeats', '1', '--out', out], { env: cleanEnv(), timeout: 200_000 });
  assert.strictEqual(r.status, 0, r.stderr);
  const lines = r.stderr.split('\n').filter((l) => /^\[\s*\d+% +\d+s\] codec: /.test(l));
  assert.ok(lines.length >= 4, `progress lines:\n${r.stderr}`);
  assert.ok(!/[\r\x1b]/.test(r.stderr), 'no carriage returns or escape sequences off a terminal');
  assert.match(r.stdout, /### Codec/);
  for (const f of ['results.json', 'results.md', 'codec.svg']) assert.ok(fs.existsSync(path.join(out, f)), f);

  // `procwire report` renders the same run again, into another directory.
  const again = path.join(dir, 'again');
  const rep = run(['report', path.join(out, 'results.json'), '--out', again]);
  assert.strictEqual(rep.status, 0, rep.stderr);
  assert.strictEqual(fs.readFileSync(path.join(again, 'codec.svg'), 'utf8'), fs.readFileSync(path.join(out, 'codec.svg'), 'utf8'));
  assert.deepStrictEqual(JSON.parse(fs.readFileSync(path.join(again, 'results.json'), 'utf8')),
    JSON.parse(fs.readFileSync(path.join(out, 'results.json'), 'utf8')));
  // In its own directory it leaves results.json as it was.
  const before = fs.statSync(path.join(out, 'results.json')).mtimeMs;
  fs.rmSync(path.join(out, 'codec.svg'));
  const inPlace = run(['report', out]);
  assert.strictEqual(inPlace.status, 0, inPlace.stderr);
  assert.ok(fs.existsSync(path.join(out, 'codec.svg')));
  assert.strictEqual(fs.statSync(path.join(out, 'results.json')).mtimeMs, before);
});

// The package's files as npm installs them (package.json "files"), with the
// addon as its prebuilt binary and no build/ or scripts but install.js.
function installedCopy(t) {
  const built = path.join(ROOT, 'build', 'Release', 'procwire.node');
  if (!fs.existsSync(built)) return null;
  const dir = tmpDir(t);
  const dest = path.join(dir, 'node_modules', 'procwire');
  fs.mkdirSync(dest, { recursive: true });
  for (const entry of ['lib', 'bin', 'bench', 'package.json', 'index.mjs', 'index.d.ts', 'scripts/install.js']) {
    const from = path.join(ROOT, entry);
    if (!fs.existsSync(from)) continue;
    fs.mkdirSync(path.dirname(path.join(dest, entry)), { recursive: true });
    fs.cpSync(from, path.join(dest, entry), { recursive: true });
  }
  const prebuilds = path.join(dest, 'prebuilds', `${process.platform}-${process.arch}`);
  fs.mkdirSync(prebuilds, { recursive: true });
  fs.copyFileSync(built, path.join(prebuilds, `procwire.abi${process.versions.modules}.node`));
  return dest;
}

test('from an installed package: no "not pinned" warning, no hint at unshipped scripts', { timeout: 240_000 }, (t) => {
  const dest = installedCopy(t);
  if (!dest) { t.skip('build/Release/procwire.node missing (npm run build)'); return; }
  // Dependencies resolve from this checkout's node_modules, as they would
  // from the user's.
  const env = cleanEnv({ NODE_PATH: path.join(ROOT, 'node_modules'), PROCWIRE_BENCH_NODE26: '' });
  const out = path.join(path.dirname(path.dirname(dest)), 'run');
  const r = run(['bench', '--quick', '--suite', 'codec', '--repeats', '1', '--out', out],
    { file: path.join(dest, 'bin', 'procwire.js'), cwd: path.dirname(path.dirname(dest)), env, timeout: 200_000 });
  assert.strictEqual(r.status, 0, r.stderr);
  assert.doesNotMatch(r.stderr, /not pinned|note:|PROCWIRE_FALLBACK/);
  const v = run(['--version'], { file: path.join(dest, 'bin', 'procwire.js'), env });
  assert.strictEqual(v.stdout, `${pkg.version}\n`);

  // A row that needs Node 26 or nats-server says how to get it without
  // naming a script of the source checkout.
  const probe = `
    const h = require(${JSON.stringify(path.join(dest, 'bench', 'lib', 'harness.js'))});
    console.log(JSON.stringify({ node: h.missingNode(26), nats: h.setupHint('scripts/setup.sh', 'none') }));`;
  const installed = JSON.parse(childProcess.execFileSync(process.execPath, ['-e', probe], { env, encoding: 'utf8' }));
  assert.doesNotMatch(installed.node, /scripts\//);
  assert.match(installed.node, /PROCWIRE_BENCH_NODE26/);
  assert.strictEqual(installed.nats, 'none');
  // The source checkout does ship them, and says so.
  const checkout = JSON.parse(childProcess.execFileSync(process.execPath,
    ['-e', probe.replace(JSON.stringify(path.join(dest, 'bench', 'lib', 'harness.js')), JSON.stringify(path.join(ROOT, 'bench', 'lib', 'harness.js')))],
    { env, encoding: 'utf8' }));
  assert.match(checkout.node, /scripts\/setup-nodes\.sh 26 installs it/);
});

test('the TLS row runs with no openssl binary on PATH', { timeout: 60_000 }, (t) => {
  const dir = tmpDir(t);
  // PATH holds node alone.
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin);
  fs.symlinkSync(process.execPath, path.join(bin, 'node'));
  const script = `
    const transports = require(${JSON.stringify(path.join(ROOT, 'bench', 'lib', 'transports.js'))});
    (async () => {
      const t = await transports.open('procwire-tls', { tmp: ${JSON.stringify(dir)} });
      const got = await new Promise((resolve) => { t.onmessage = resolve; t.send({ hello: 'tls' }); });
      await t.close();
      console.log(JSON.stringify(got));
      process.exit(0);
    })().catch((err) => { console.error(err); process.exit(1); });`;
  const env = { ...process.env, PATH: bin };
  const r = childProcess.spawnSync(process.execPath, ['-e', script], { env, encoding: 'utf8', timeout: 45_000, cwd: dir });
  assert.strictEqual(r.status, 0, `${r.stdout}\n${r.stderr}`);
  assert.deepStrictEqual(JSON.parse(r.stdout.trim().split('\n').pop()), { hello: 'tls' });
});
