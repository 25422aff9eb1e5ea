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

// A quick codec bench run takes about ten seconds; its limits keep this
// file's worst case well inside the 600 s scripts/test.sh gives it.
const BENCH_RUN_TIMEOUT = 100_000;
const BENCH_TEST_TIMEOUT = 150_000;

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

test('off a terminal a bench run prints plain progress lines, and report re-renders it', { timeout: BENCH_TEST_TIMEOUT }, (t) => {
  const dir = tmpDir(t);
  const out = path.join(dir, 'run');
  const r = run(['bench', '--quick', '--suite', 'codec', '--repeats', '1', '--out', out], { timeout: BENCH_RUN_TIMEOUT });
  assert.strictEqual(r.status, 0, r.stderr);
  const lines = r.stderr.split('\n').filter((l) => /^\[\s*\d+% +\d+s\] codec: /.test(l));
  assert.ok(lines.length >= 4, `progress lines:\n${r.stderr}`);
  // The escape character is the point of this check.
  // eslint-disable-next-line no-control-regex
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
  // The addon for the Node line running this test (PROCWIRE_ADDON names it
  // on the lines other than the machine's).
  const built = process.env.PROCWIRE_ADDON || path.join(ROOT, 'build', 'Release', 'procwire.node');
  try {
    require(built);
  } catch {
    return null;
  }
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

test('from an installed package: no "not pinned" warning, no hint at unshipped scripts', { timeout: BENCH_TEST_TIMEOUT }, (t) => {
  const dest = installedCopy(t);
  if (!dest) { t.skip('no addon for this Node line (npm run build, or PROCWIRE_ADDON)'); return; }
  // Dependencies resolve from this checkout's node_modules, as they would
  // from the user's.
  const env = cleanEnv({ NODE_PATH: path.join(ROOT, 'node_modules'), PROCWIRE_BENCH_NODE26: '' });
  const out = path.join(path.dirname(path.dirname(dest)), 'run');
  const r = run(['bench', '--quick', '--suite', 'codec', '--repeats', '1', '--out', out],
    { file: path.join(dest, 'bin', 'procwire.js'), cwd: path.dirname(path.dirname(dest)), env, timeout: BENCH_RUN_TIMEOUT });
  assert.strictEqual(r.status, 0, r.stderr);
  assert.doesNotMatch(r.stderr, /not pinned|note:|PROCWIRE_FALLBACK/);
  const v = run(['--version'], { file: path.join(dest, 'bin', 'procwire.js'), env });
  assert.strictEqual(v.stdout, `${pkg.version}\n`);

  // A row that needs Node 26 or nats-server says how to get it without
  // naming a script of the source checkout.
  const probe = `
    const h = require(${JSON.stringify(path.join(dest, 'bench', 'lib', 'harness.js'))});
    console.log(JSON.stringify({ node: h.missingNode(26), nats: h.setupHint('scripts/setup.sh', 'none') }));`;
  const installed = JSON.parse(childProcess.execFileSync(process.execPath, ['-e', probe], { env, encoding: 'utf8', timeout: 30_000 }));
  assert.doesNotMatch(installed.node, /scripts\//);
  assert.match(installed.node, /PROCWIRE_BENCH_NODE26/);
  assert.strictEqual(installed.nats, 'none');
  // The source checkout does ship them, and says so.
  const checkout = JSON.parse(childProcess.execFileSync(process.execPath,
    ['-e', probe.replace(JSON.stringify(path.join(dest, 'bench', 'lib', 'harness.js')), JSON.stringify(path.join(ROOT, 'bench', 'lib', 'harness.js')))],
    { env, encoding: 'utf8', timeout: 30_000 }));
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

// ---- charts (bench/report.js) ------------------------------------------------

const report = require('../bench/report');
const REFERENCE = path.join(ROOT, 'bench-results', 'reference', 'results.json');

// A suite as the harness records it: xs, a metric, and per peer per x the
// median and every repeat's sample.
function syntheticSuite() {
  const xs = [64, 1024, 16384];
  const peer = (id, base) => Object.fromEntries(xs.map((x, k) => {
    const samples = [base / (k + 1), (base * 1.3) / (k + 1), (base * 0.8) / (k + 1)];
    return [String(x), { rps: { median: base / (k + 1), samples } }];
  }));
  const data = { a: peer('a', 2000), b: peer('b', 900) };
  delete data.b['16384'];
  return {
    name: 'synthetic', title: 'Synthetic', xs, xLabel: 'payload', xUnit: 'bytes',
    metrics: [{ id: 'rps', label: 'round trips/s', unit: '/s', better: 'higher' }],
    peers: [
      { id: 'a', label: 'peer A', status: 'ok' },
      { id: 'b', label: 'peer B', status: 'ok' },
      { id: 'c', label: 'peer C', status: 'failed', reason: 'child crashed: boom' },
      { id: 'd', label: 'peer D', status: 'skipped', reason: 'not installed' },
    ],
    data, ratioTo: ['a'], repeats: 3,
  };
}

test('charts: no panel has more than six series, and colours differ within each', () => {
  const results = JSON.parse(fs.readFileSync(REFERENCE, 'utf8'));
  for (const suite of Object.values(results.suites)) {
    const groups = report.peerGroups(suite);
    const shown = new Set(groups.flatMap((g) => g.peers));
    assert.deepStrictEqual([...shown].sort(), suite.peers.map((p) => p.id).sort(), `${suite.name}: every peer in a panel`);
    const style = report.seriesStyles(suite, groups);
    for (const g of groups) {
      assert.ok(g.peers.length <= report.MAX_SERIES, `${suite.name}: ${g.peers.length} series in "${g.title}"`);
      const colours = g.peers.map((id) => style(g, id).color);
      assert.strictEqual(new Set(colours).size, colours.length, `${suite.name}: colours repeat in "${g.title}": ${colours}`);
    }
    // A peer shown in several panels keeps its colour.
    for (const id of shown) {
      const seen = new Set(groups.filter((g) => g.peers.includes(id)).map((g) => style(g, id).color));
      assert.strictEqual(seen.size, 1, `${suite.name}: ${id} changes colour between panels`);
    }
  }
});

test('charts: y axes fitted to the data, ticks with consistent units', () => {
  // No tick outside the data's range, and several inside even a narrow one.
  for (const [lo, hi] of [[12, 900], [7, 95000], [31000, 68000], [0.4, 9]]) {
    const ticks = report.logTicks(lo, hi);
    assert.ok(ticks.length >= 3, `[${lo}, ${hi}]: ${ticks}`);
    assert.ok(ticks.every((v) => v >= lo * 0.9999 && v <= hi * 1.0001), `[${lo}, ${hi}]: ${ticks}`);
  }
  const us = { unit: 'µs' };
  assert.deepStrictEqual([5, 50, 500, 5000, 50000, 2e6].map((v) => report.fmtTick(v, us)),
    ['5 µs', '50 µs', '500 µs', '5 ms', '50 ms', '2 s']);
  assert.deepStrictEqual([0.1, 2, 1500].map((v) => report.fmtTick(v, { unit: 'ms' })), ['100 µs', '2 ms', '1.5 s']);
  assert.deepStrictEqual([500, 20000, 1.5e6].map((v) => report.fmtTick(v, { unit: '/s' })), ['500/s', '20k/s', '1.5M/s']);

  // The reference latency chart: every tick label has a unit, and the
  // lowest and highest ticks lie within a factor of two of the data.
  const results = JSON.parse(fs.readFileSync(REFERENCE, 'utf8'));
  const svg = report.toSvg(results.suites.latency);
  const ticks = [...svg.matchAll(/text-anchor="end" font-size="11">([^<]+)</g)].map((m) => m[1]);
  assert.ok(ticks.length > 4);
  for (const label of ticks) assert.match(label, /^[\d.]+ (µs|ms|s)$/);
  const toUs = (label) => { const [n, u] = label.split(' '); return Number(n) * { µs: 1, ms: 1e3, s: 1e6 }[u]; };
  const suite = results.suites.latency;
  const samples = Object.values(suite.data).flatMap((byX) => Object.values(byX)
    .flatMap((m) => suite.chartMetrics.flatMap((id) => m[id].samples)));
  const values = ticks.map(toUs);
  // The old axes ran to the next power of ten past the data.
  assert.ok(Math.max(...values) <= 2 * Math.max(...samples), `top tick ${Math.max(...values)} µs, data up to ${Math.max(...samples)} µs`);
  assert.ok(Math.min(...values) >= Math.min(...samples) / 2, `bottom tick ${Math.min(...values)} µs, data from ${Math.min(...samples)} µs`);
});

test('charts: whiskers from the repeats, failed and skipped rows marked', () => {
  const suite = syntheticSuite();
  const svg = report.toSvg(suite);
  // One whisker per point that has several samples: a and b (2 of 3 xs).
  const whiskers = svg.match(/<path d="M[\d.]+ [\d.]+ V[\d.]+ M[\d.]+ [\d.]+ h8 M[\d.]+ [\d.]+ h8"/g) || [];
  assert.strictEqual(whiskers.length, 5);
  assert.match(svg, /peer A, 64 B: 2\.0k \(min 1\.6k, max 2\.6k\)/);
  // The peer's label, then why, on a line of its own (wrapped inside the panel).
  assert.match(svg, />peer C<\/text>\n<text [^>]*fill="#c00000"[^>]*>FAILED: child crashed: boom</);
  assert.match(svg, />peer D<\/text>\n<text [^>]*fill="#777777"[^>]*>skipped: not installed</);
  // b has no value at 16 KiB: marked on the axis.
  assert.match(svg, /<title>peer B, 16 KiB: no result<\/title>/);
  // The failed row stays in the report's tables too.
  assert.match(report.suiteMarkdown(suite), /Failed: peer C: child crashed: boom/);
});
