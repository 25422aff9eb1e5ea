'use strict';
// The shared benchmark harness: runs each peer of a suite in fresh processes
// ("drivers"), interleaves the repeats (A B C A B C ...), bounds every run in
// time, kills what it started, and reduces the samples to medians.
//
// Nothing here loads procwire itself, so drivers can run under another Node
// line (e.g. .nodes/26) whose ABI the addon was not built for.

const childProcess = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const ROOT = path.join(__dirname, '..', '..');
const RESULT_TAG = '@@procwire-bench-result ';
const TICK_TAG = '@@procwire-bench-tick';

// ---- statistics ------------------------------------------------------------

function sorted(values) {
  return values.filter((v) => typeof v === 'number' && Number.isFinite(v)).sort((a, b) => a - b);
}

// Nearest-rank percentile of already-sorted values (p in 0..100).
function percentileSorted(s, p) {
  if (s.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * s.length);
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))];
}

function median(values) {
  const s = sorted(values);
  if (s.length === 0) return NaN;
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

function percentile(values, p) {
  return percentileSorted(sorted(values), p);
}

// ---- clean-up registry -------------------------------------------------------
// Everything started or created by the bench registers here, so an error, a
// timeout or Ctrl-C still kills process groups and removes temp dirs.

const live = { groups: new Set(), pids: new Set(), dirs: new Set() };
let exitHooked = false;

function cleanupSync() {
  for (const pid of live.groups) {
    try { process.kill(-pid, 'SIGKILL'); } catch { /* gone */ }
  }
  live.groups.clear();
  for (const pid of live.pids) {
    try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
  }
  live.pids.clear();
  for (const dir of live.dirs) {
    try { fs.rmSync(dir, { recursive: true, force: true }); } catch { /* best effort */ }
  }
  live.dirs.clear();
}

function hookExit() {
  if (exitHooked) return;
  exitHooked = true;
  process.on('exit', cleanupSync);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.once(sig, () => {
      process.stderr.write(`\nprocwire bench: ${sig}, cleaning up\n`);
      cleanupSync();
      process.exit(130);
    });
  }
}

function makeTempDir(prefix = 'procwire-bench-') {
  hookExit();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  live.dirs.add(dir);
  return dir;
}

function removeTempDir(dir) {
  try { fs.rmSync(dir, { recursive: true, force: true }); } catch { /* best effort */ }
  live.dirs.delete(dir);
}

function trackPid(pid) { hookExit(); live.pids.add(pid); }
function untrackPid(pid) { live.pids.delete(pid); }

// ---- progress bar ------------------------------------------------------------

class Progress {
  constructor(total, { stream = process.stderr, enabled } = {}) {
    this.total = Math.max(1, total);
    this.done = 0;
    this.label = '';
    this.stream = stream;
    this.enabled = enabled === undefined ? Boolean(stream.isTTY) : enabled;
    this.start = Date.now();
    this._last = 0;
  }

  addTotal(n) { this.total += n; this.render(); }

  set(label) { this.label = label; this.render(); }

  tick(n = 1) { this.done = Math.min(this.total, this.done + n); this.render(); }

  render(force = false) {
    if (!this.enabled) return;
    const now = Date.now();
    if (!force && now - this._last < 80 && this.done < this.total) return;
    this._last = now;
    const cols = Math.max(40, (this.stream.columns || 80) - 1);
    const frac = this.done / this.total;
    const width = 24;
    const fill = Math.round(frac * width);
    const elapsed = (now - this.start) / 1000;
    const eta = frac > 0.02 ? Math.max(0, elapsed / frac - elapsed) : NaN;
    const head = `[${'#'.repeat(fill)}${'-'.repeat(width - fill)}] ${String(Math.floor(frac * 100)).padStart(3)}% ` +
      `${fmtSeconds(elapsed)}${Number.isFinite(eta) ? ` eta ${fmtSeconds(eta)}` : ''} `;
    let line = head + this.label;
    if (line.length > cols) line = line.slice(0, cols);
    this.stream.write(`\r${line}\x1b[K`);
  }

  // Prints a message above the bar.
  log(message) {
    if (this.enabled) this.stream.write('\r\x1b[K');
    this.stream.write(`${message}\n`);
    this.render(true);
  }

  finish() {
    if (!this.enabled) return;
    this.render(true);
    this.stream.write('\r\x1b[K');
  }
}

function fmtSeconds(s) {
  if (s < 60) return `${s.toFixed(0)}s`;
  return `${Math.floor(s / 60)}m${String(Math.round(s % 60)).padStart(2, '0')}s`;
}

// ---- drivers -------------------------------------------------------------------

// Runs `node <script> --driver <json>` in its own process group and resolves
// with the result the driver printed. Rejects (after killing the whole group)
// on a timeout, a crash or a missing result. onTick is called for each tick.
function runDriver({ execPath = process.execPath, script, config, timeoutMs, onTick, env }) {
  hookExit();
  return new Promise((resolve, reject) => {
    const child = childProcess.spawn(execPath, [script, '--driver', JSON.stringify(config)], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,   // own process group: its children die with it
      env: { ...process.env, ...env },
    });
    live.groups.add(child.pid);
    let out = '';
    let err = '';
    let result;
    let settled = false;
    const timer = setTimeout(() => finish(new Error(`timed out after ${(timeoutMs / 1000).toFixed(0)} s`)), timeoutMs);
    function killGroup() {
      try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ }
      live.groups.delete(child.pid);
    }
    function finish(error) {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      killGroup();
      if (error) {
        const tail = err.trim().split('\n').slice(-6).join('\n');
        if (tail) error.message += `\n${tail}`;
        reject(error);
      } else {
        resolve(result);
      }
    }
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk) => {
      out += chunk;
      let nl;
      while ((nl = out.indexOf('\n')) >= 0) {
        const line = out.slice(0, nl);
        out = out.slice(nl + 1);
        if (line === TICK_TAG) {
          if (onTick) onTick();
        } else if (line.startsWith(RESULT_TAG)) {
          try { result = JSON.parse(line.slice(RESULT_TAG.length)); } catch (e) { finish(e); }
        }
      }
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk) => { err = (err + chunk).slice(-8192); });
    child.on('error', (e) => finish(e));
    child.on('close', (code, signal) => {
      if (result !== undefined && result.error === undefined) finish(null);
      else if (result !== undefined) finish(new Error(result.error));
      else finish(new Error(`driver exited (${signal || `code ${code}`}) without a result`));
    });
  });
}

// The driver side: called from a suite file run as `<suite> --driver <json>`.
// run(config, tick) returns the result object.
function driverMain(run) {
  const config = JSON.parse(process.argv[3]);
  const tick = () => process.stdout.write(`${TICK_TAG}\n`);
  // A driver is never allowed to outlive its budget, even if the parent died.
  const guard = setTimeout(() => {
    process.stderr.write('driver: internal time limit reached\n');
    process.exit(3);
  }, config.hardLimitMs || 120000);
  guard.unref();
  Promise.resolve()
    .then(() => run(config, tick))
    .then((result) => {
      process.stdout.write(`${RESULT_TAG}${JSON.stringify(result)}\n`, () => process.exit(0));
    }, (err) => {
      process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
      process.stdout.write(`${RESULT_TAG}${JSON.stringify({ error: String(err && err.message ? err.message : err) })}\n`,
        () => process.exit(1));
    });
}

// ---- suites ----------------------------------------------------------------------
//
// A driver-based suite plan:
//   { name, title, script, xs, xLabel, xUnit, metrics: [{ id, label, unit, better }],
//     peers: [{ id, label, execPath?, env?, skip? }], repeats, config(peer) -> driver config,
//     ticksPerRun, timeoutMs, ratioTo, notes }
// Result (also what in-process suites return):
//   { name, title, xs, xLabel, xUnit, metrics, peers: [{ id, label, status, reason? }],
//     data: { [peerId]: { [x]: { [metric]: { median, samples } } } },
//     histograms: { [peerId]: { in: [...], out: [...] } }, ratioTo, notes, seconds }

async function runPlan(plan, progress) {
  const started = Date.now();
  const peers = plan.peers.map((p) => ({ ...p, status: p.skip ? 'skipped' : 'ok', reason: p.skip || undefined, errors: [] }));
  const samples = {};
  const histograms = {};
  const active = peers.filter((p) => p.status === 'ok');
  // Under a time budget (--quick) every peer runs once; a later repeat
  // starts only if, at the pace so far, the whole repeat still fits, so
  // every peer has the same number of samples.
  let repeats = plan.repeats;
  for (let rep = 0; rep < repeats; rep++) {
    if (rep > 0 && plan.budgetMs) {
      const spent = Date.now() - started;
      if (spent + spent / rep > plan.budgetMs) {
        progress.tick((repeats - rep) * active.length * plan.ticksPerRun);
        repeats = rep;
        break;
      }
    }
    for (const peer of active) {
      if (peer.status !== 'ok' && peer.errors.length >= 2) continue;  // give up on a peer that keeps failing
      progress.set(`${plan.name}: ${peer.label} (run ${rep + 1}/${plan.repeats})`);
      let ticks = 0;
      try {
        const result = await runDriver({
          execPath: peer.execPath,
          script: plan.script,
          config: { ...plan.config(peer), peer: peer.id, rep },
          timeoutMs: plan.timeoutMs,
          env: { ...plan.env, ...peer.env },
          onTick: () => { ticks++; progress.tick(); },
        });
        for (const [x, metrics] of Object.entries(result.data || {})) {
          for (const [m, v] of Object.entries(metrics)) {
            const byX = ((samples[peer.id] ||= {})[x] ||= {});
            (byX[m] ||= []).push(v);
          }
        }
        if (result.histogram) mergeHistogram(histograms, peer.id, result.histogram);
      } catch (err) {
        peer.errors.push(err.message);
        const lines = err.message.split('\n');
        const detail = lines.slice(1).filter((l) => !/^\s+at /.test(l)).slice(-3);
        progress.log(`  ${plan.name}: ${peer.label} run ${rep + 1} failed: ${[lines[0], ...detail].join('\n    ')}`);
        if (peer.errors.length >= 2) peer.status = 'failed';
      }
      progress.tick(Math.max(0, plan.ticksPerRun - ticks));
    }
  }
  const data = {};
  for (const peer of peers) {
    const s = samples[peer.id];
    if (s && peer.status === 'failed') peer.status = 'ok';  // some runs worked: show them, with a note
    if (!s) {
      if (peer.status === 'ok') { peer.status = 'failed'; }
      if (peer.status === 'failed') peer.reason = (peer.errors[peer.errors.length - 1] || 'no result').split('\n')[0];
      continue;
    }
    data[peer.id] = {};
    for (const [x, metrics] of Object.entries(s)) {
      data[peer.id][x] = {};
      for (const [m, v] of Object.entries(metrics)) data[peer.id][x][m] = { median: median(v), samples: v };
    }
    if (peer.errors.length) peer.reason = `${peer.errors.length} of ${repeats} runs failed (median of the others): ${peer.errors[0].split('\n')[0]}`;
  }
  return {
    name: plan.name,
    title: plan.title,
    description: plan.description,
    xs: plan.xs,
    xLabel: plan.xLabel,
    xUnit: plan.xUnit,
    metrics: plan.metrics,
    chartMetrics: plan.chartMetrics,
    peers: peers.map(({ id, label, status, reason }) => ({ id, label, status, reason })),
    data,
    histograms,
    ratioTo: plan.ratioTo,
    pairs: plan.pairs,
    notes: [...(plan.notes || []), ...(repeats < plan.repeats ? [`--quick: ${repeats} of ${plan.repeats} repeats fitted this suite's ${plan.budgetMs / 1000} s`] : [])],
    repeats,
    seconds: (Date.now() - started) / 1000,
  };
}

function mergeHistogram(into, peerId, hist) {
  const cur = (into[peerId] ||= { in: {}, out: {} });
  for (const dir of ['in', 'out']) {
    for (const b of hist[dir] || []) {
      const key = `${b.min}-${b.max}`;
      const e = (cur[dir][key] ||= { min: b.min, max: b.max, count: 0 });
      e.count += b.count;
    }
  }
}

// Histograms merged above are keyed objects; reports want sorted arrays.
function histogramArrays(h) {
  const out = {};
  for (const [peer, dirs] of Object.entries(h || {})) {
    out[peer] = {};
    for (const dir of ['in', 'out']) {
      const v = dirs[dir];
      out[peer][dir] = Array.isArray(v) ? v : Object.values(v || {}).sort((a, b) => a.min - b.min);
    }
  }
  return out;
}

// ---- misc --------------------------------------------------------------------------

// Another Node line: $PROCWIRE_BENCH_NODE<major> (a node binary), or the one
// a source checkout's scripts/setup-nodes.sh installs in .nodes/, if present.
function otherNode(major) {
  const files = [process.env[`PROCWIRE_BENCH_NODE${major}`], path.join(ROOT, '.nodes', String(major), 'bin', 'node')];
  for (const file of files.filter(Boolean)) {
    try {
      fs.accessSync(file, fs.constants.X_OK);
      return file;
    } catch {}
  }
  return null;
}

// procwire on another Node line: that line's node binary and a copy, in
// tmp, of the addon built for it (a shipped prebuilt binary for its ABI,
// else scripts/build-for.sh's build), which its drivers and their children
// load through PROCWIRE_ADDON. Copied for the reason bench/lib/cli.js pins
// the default addon: a rebuild during the run cannot mix binaries. Returns
// { execPath, env } or { skip: why not }.
function procwireOn(major, tmp) {
  const execPath = otherNode(major);
  if (execPath === null) return { skip: missingNode(major) };
  let abi;
  try {
    abi = childProcess.execFileSync(execPath, ['-p', 'process.versions.modules'], { encoding: 'utf8', timeout: 30_000 }).trim();
  } catch (err) {
    return { skip: `Node ${major} did not run (${String(err.message).split('\n')[0]})` };
  }
  const candidates = [
    path.join(ROOT, 'prebuilds', `${process.platform}-${process.arch}`, `procwire.abi${abi}.node`),
    path.join(ROOT, '.build', `node${major}`, 'build', 'Release', 'procwire.node'),
  ];
  const source = candidates.find((file) => fs.existsSync(file));
  if (source === undefined) {
    return { skip: `no procwire addon for Node ${major} (${setupHint(`scripts/build-for.sh ${major}`, 'no prebuilt binary for its ABI')})` };
  }
  const copy = path.join(tmp, `procwire-node${major}.node`);
  try {
    fs.copyFileSync(source, copy);
    childProcess.execFileSync(execPath, ['-e', 'require(process.argv[1])', copy], { stdio: 'pipe', timeout: 30_000 });
  } catch (err) {
    return { skip: `the addon for Node ${major} (${path.relative(ROOT, source)}) does not load: ${String(err.message).split('\n')[0]}` };
  }
  return { execPath, env: { PROCWIRE_ADDON: copy } };
}

// How to get a missing piece: a script of the source checkout is named only
// when it is there (an installed package ships none of them).
function setupHint(script, otherwise) {
  return fs.existsSync(path.join(ROOT, script.split(' ')[0])) ? `${script} installs it` : otherwise;
}

// Why a row that needs another Node line is skipped.
function missingNode(major) {
  return `Node ${major} not found (set PROCWIRE_BENCH_NODE${major}=/path/to/node; ` +
    `${setupHint(`scripts/setup-nodes.sh ${major}`, `any Node ${major} binary will do`)})`;
}

function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }

// A full garbage collection, for in-process suites to run between samples:
// otherwise a sample pays for the garbage the one before it left (the
// collector's work arrives later than the allocation), and a peer that
// always follows an allocation-heavy one reads slower than it is. The
// collector is reached through V8's --expose-gc flag, set here at run time.
let gcFunction = null;
function collectGarbage() {
  if (gcFunction === null) {
    require('v8').setFlagsFromString('--expose-gc');
    gcFunction = require('vm').runInNewContext('gc');
  }
  gcFunction();
}

function now() { return Number(process.hrtime.bigint()) / 1e6; } // ms, CLOCK_MONOTONIC

function fmtSize(bytes) {
  if (bytes >= 1024 * 1024 && bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)} MiB`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} B`;
}

function fmtNum(v) {
  if (!Number.isFinite(v)) return '—';
  const a = Math.abs(v);
  if (a >= 1e7) return `${(v / 1e6).toFixed(1)}M`;
  if (a >= 1e6) return `${(v / 1e6).toFixed(2)}M`;
  if (a >= 1e4) return `${(v / 1e3).toFixed(0)}k`;
  if (a >= 1e3) return `${(v / 1e3).toFixed(1)}k`;
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

// Parses argv of the form --flag, --key value, --key=value.
function parseArgs(argv) {
  const out = { _: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) { out._.push(a); continue; }
    const eq = a.indexOf('=');
    if (eq > 0) { out[a.slice(2, eq)] = a.slice(eq + 1); continue; }
    const key = a.slice(2);
    if (i + 1 < argv.length && !argv[i + 1].startsWith('--') && ['suite', 'out', 'repeats'].includes(key)) {
      out[key] = argv[++i];
    } else {
      out[key] = true;
    }
  }
  return out;
}

module.exports = {
  collectGarbage,
  ROOT,
  median,
  percentile,
  percentileSorted,
  Progress,
  runDriver,
  driverMain,
  runPlan,
  histogramArrays,
  makeTempDir,
  removeTempDir,
  trackPid,
  untrackPid,
  cleanupSync,
  otherNode,
  procwireOn,
  setupHint,
  missingNode,
  sleep,
  now,
  fmtSize,
  fmtNum,
  parseArgs,
};
