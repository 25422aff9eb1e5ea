'use strict';
// Runs a set of suites (for `procwire bench` and for each suite file run on
// its own) and writes / prints the report.

const os = require('os');
const path = require('path');
const harness = require('./harness');

// The suites, in the order they run, each with its share of --quick's time
// (seconds on an idle 2-vCPU machine; --quick's whole run stays under 90 s).
// Every suite runs each of its peers at least once, side by side; a further
// repeat runs only while the suite's share lasts (a loaded machine gets
// fewer repeats, not a longer run). A new suite adds one entry here.
const REGISTRY = [
  { name: 'codec', quickSeconds: 7 },
  { name: 'roundtrip', quickSeconds: 20 },
  { name: 'parity', quickSeconds: 7 },
  { name: 'fork-vs-named', quickSeconds: 8 },
  { name: 'master-worker', quickSeconds: 8 },
  { name: 'latency', quickSeconds: 8 },
  { name: 'bulk', quickSeconds: 7 },
  { name: 'cluster-http', quickSeconds: 7 },
  { name: 'pool', quickSeconds: 8 },
];
const SUITES = REGISTRY.map((s) => s.name);

// The time share of a suite under --quick, in ms (null: no limit). An
// explicit --repeats is honoured whatever it costs.
function quickBudgetMs(name, quick, repeats) {
  if (!quick || repeats) return null;
  const entry = REGISTRY.find((s) => s.name === name);
  return entry ? entry.quickSeconds * 1000 : null;
}

function procwireVersion() {
  try { return require(path.join(harness.ROOT, 'package.json')).version; } catch { return '?'; }
}

// Every run of one bench uses the same addon binary: a copy of the one
// lib/native.js would load (the shipped prebuilt binary for this Node line,
// else a source build), taken at the start (a rebuild during the run cannot
// mix binaries or leave a run without one). Drivers and their children
// inherit PROCWIRE_ADDON, which lib/native.js loads first. A user's own
// PROCWIRE_ADDON is left alone.
async function pinAddon(tmp, log) {
  if (process.env.PROCWIRE_ADDON || process.env.PROCWIRE_FORCE_FALLBACK === '1') return;
  const fs = require('fs');
  const candidates = [
    path.join(harness.ROOT, 'prebuilds', `${process.platform}-${process.arch}`, `procwire.abi${process.versions.modules}.node`),
    path.join(harness.ROOT, 'build', 'Release', 'procwire.node'),
  ];
  const copy = path.join(tmp, 'procwire.node');
  const problems = [];
  for (const source of candidates) {
    // A build that is being replaced right now gets a few seconds to finish.
    for (let attempt = 0; ; attempt++) {
      if (!fs.existsSync(source)) break;
      try {
        fs.copyFileSync(source, copy);
        require(copy);
        process.env.PROCWIRE_ADDON = copy;
        return;
      } catch (err) {
        // Built for another Node line: waiting will not change that.
        const otherLine = /NODE_MODULE_VERSION|different Node\.js version/.test(String(err.message));
        if (otherLine || attempt === 9) {
          const message = otherLine ? 'built for another Node line' : String(err.message).split('\n')[0];
          problems.push(`${path.relative(harness.ROOT, source)}: ${message}`);
          break;
        }
        await harness.sleep(3000);
      }
    }
  }
  log(`note: no procwire addon for this platform and Node line${problems.length ? ` loads (${problems.join('; ')})` : ''}: ` +
    'procwire rows use the pure-JavaScript fallback');
}

// Off a terminal (a CI log, a pipe) the progress bar would be noise or, as
// before, nothing at all: instead one plain line per run as it starts.
class PlainProgress extends harness.Progress {
  constructor(stream = process.stderr) {
    super(0, { stream, enabled: false });
    this.lastLabel = '';
  }

  set(label) {
    this.label = label;
    if (label === this.lastLabel) return;
    this.lastLabel = label;
    const elapsed = Math.round((Date.now() - this.start) / 1000);
    const pct = Math.floor((this.done / this.total) * 100);
    this.stream.write(`[${String(pct).padStart(3)}% ${String(elapsed).padStart(4)}s] ${label}\n`);
  }
}

function makeProgress() {
  return process.stderr.isTTY ? new harness.Progress(0) : new PlainProgress();
}

// options: { quick, suites: [names], out (dir or null), repeats, args, print }
async function runBench(options) {
  const quick = Boolean(options.quick);
  const names = options.suites || SUITES;
  for (const n of names) {
    if (!SUITES.includes(n)) throw new Error(`unknown suite "${n}" (suites: ${SUITES.join(', ')})`);
  }
  const started = Date.now();
  const progress = makeProgress();
  const log = (msg) => progress.log(msg);
  const tmp = harness.makeTempDir();
  const results = {
    version: 1,
    date: require('../report').localDate(),
    meta: {
      node: process.versions.node,
      platform: process.platform,
      arch: process.arch,
      cpus: os.cpus().length,
      cpuModel: (os.cpus()[0] || {}).model || '?',
      procwire: procwireVersion(),
      quick,
      started: new Date(started).toISOString(),
      seconds: 0,
    },
    suites: {},
  };
  const prepared = [];
  try {
    await pinAddon(tmp, log);
    for (const name of names) {
      const mod = require(path.join(__dirname, '..', name));
      if (mod.inProcess) {
        prepared.push({ name, mod, budgetMs: quickBudgetMs(name, quick, options.repeats) });
        progress.addTotal(mod.ticks({ quick, repeats: options.repeats }));
        continue;
      }
      try {
        const plan = await mod.plan({ quick, repeats: options.repeats, log, tmp, args: options.args || {} });
        plan.budgetMs = quickBudgetMs(name, quick, options.repeats);
        prepared.push({ name, mod, plan });
        const runs = plan.peers.filter((p) => !p.skip).length * plan.repeats;
        progress.addTotal(runs * plan.ticksPerRun);
      } catch (err) {
        results.suites[name] = { name, title: name, error: err.message, peers: [], xs: [], metrics: [] };
        log(`${name}: could not be prepared: ${err.message}`);
      }
    }
    for (const p of prepared) {
      try {
        const r = p.mod.inProcess
          ? await p.mod.runInProcess({ quick, repeats: options.repeats, progress, log, budgetMs: p.budgetMs })
          : await harness.runPlan(p.plan, progress);
        r.histograms = harness.histogramArrays(r.histograms);
        results.suites[p.name] = r;
      } catch (err) {
        results.suites[p.name] = { name: p.name, title: p.name, error: err.message, peers: [], xs: [], metrics: [] };
        log(`${p.name}: failed: ${err.message}`);
      } finally {
        if (p.plan && p.plan.cleanup) {
          try { await p.plan.cleanup(); } catch (err) { log(`${p.name}: clean-up: ${err.message}`); }
          p.plan.cleanup = null;
        }
      }
    }
  } finally {
    for (const p of prepared) {
      if (p.plan && p.plan.cleanup) { try { await p.plan.cleanup(); } catch { /* reported above */ } }
    }
    harness.removeTempDir(tmp);
    progress.finish();
  }
  results.meta.seconds = (Date.now() - started) / 1000;
  return results;
}

// A path as the user would type it: relative below the working directory,
// absolute elsewhere.
function shortPath(file) {
  const rel = path.relative(process.cwd(), file);
  return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : file;
}

// A mistake on the command line: exit status 2 and the usage text.
class UsageError extends Error {}

// The options `procwire bench` and `node bench/<suite>.js` take, each checked:
// a misspelt option or a value that is not a number must not silently run
// the default benchmark for minutes.
const OPTIONS = {
  quick: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  suite: { type: 'string' },
  out: { type: 'string' },
  repeats: { type: 'string' },
  workers: { type: 'string' },
  concurrency: { type: 'string' },
};
const LIMITS = { repeats: [1, 1000], workers: [1, 256], concurrency: [1, 100000] };

function parseBenchArgs(argv, { suites = true } = {}) {
  let parsed;
  try {
    parsed = require('util').parseArgs({ args: argv, options: OPTIONS, strict: true, allowPositionals: false });
  } catch (err) {
    throw new UsageError(String(err.message).split('\n')[0].replace(/\. To specify a positional argument.*$/, ''));
  }
  const args = { ...parsed.values };
  for (const [name, [min, max]] of Object.entries(LIMITS)) {
    if (args[name] === undefined) continue;
    const text = args[name];
    const n = Number(text);
    if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new UsageError(`--${name} must be a whole number from ${min} to ${max} (got "${text}")`);
    }
    args[name] = n;
  }
  if (args.suite !== undefined) {
    if (!suites) throw new UsageError('--suite is for `procwire bench`: this script runs one suite');
    const names = args.suite.split(',').map((x) => x.trim()).filter(Boolean);
    const unknown = names.filter((n) => !SUITES.includes(n));
    if (names.length === 0 || unknown.length > 0) {
      throw new UsageError(`unknown suite "${unknown[0] || args.suite}" (suites: ${SUITES.join(', ')})`);
    }
    args.suites = names;
  }
  if (args.out !== undefined && args.out === '') throw new UsageError('--out needs a directory');
  return args;
}

async function benchCommand(argv) {
  const args = parseBenchArgs(argv);
  if (args.help) {
    process.stdout.write(usage());
    return 0;
  }
  const report = require('../report');
  const results = await runBench({
    quick: Boolean(args.quick),
    suites: args.suites,
    repeats: args.repeats,
    args,
  });
  const out = typeof args.out === 'string'
    ? path.resolve(args.out)
    : path.resolve('bench-results', results.date);
  const files = report.writeReport(results, out);
  process.stdout.write(`${report.toMarkdown(results)}\n`);
  process.stderr.write(`\nwrote ${files.map(shortPath).join(', ')}\n`);
  return 0;
}

function usage() {
  return [
    'usage:',
    '  procwire bench [--quick] [--suite codec,roundtrip,parity,fork-vs-named,master-worker,latency,bulk,cluster-http] [--out dir] [--repeats n]',
    '                 [--workers n] [--concurrency n]',
    '      runs the suites (default: all, full grid; --quick: under 90 s, fewer sizes and repeats) and writes',
    '      <out or bench-results/YYYY-MM-DD>/results.json, results.md and one SVG per suite',
    '  procwire report <results.json | dir> [--out dir]',
    '      writes results.md and the SVG charts again from a run\'s results.json (into its directory,',
    '      or --out)',
    '  procwire stats <results.json | dir>',
    '      prints the message-size histograms recorded in a run',
    '  procwire --version | --help',
    '',
  ].join('\n');
}

// `node bench/<suite>.js [--quick] [--out dir]`: that suite alone, tables on stdout.
function standalone(name) {
  let args;
  try {
    args = parseBenchArgs(process.argv.slice(2), { suites: false });
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`bench/${name}.js: ${err.message}\nusage: node bench/${name}.js [--quick] [--repeats n] [--out dir]\n`);
    process.exitCode = 2;
    return;
  }
  if (args.help) {
    process.stdout.write(`usage: node bench/${name}.js [--quick] [--repeats n] [--out dir]\n`);
    return;
  }
  const report = require('../report');
  // Deferred: the suite file that called us must finish loading first.
  setImmediate(() => runBench({ quick: Boolean(args.quick), suites: [name], repeats: args.repeats, args })
    .then((results) => {
      process.stdout.write(`${report.suiteMarkdown(results.suites[name])}\n`);
      if (typeof args.out === 'string') {
        const files = report.writeReport(results, path.resolve(args.out));
        process.stderr.write(`wrote ${files.join(', ')}\n`);
      }
      process.exit(results.suites[name].error ? 1 : 0);
    }, (err) => {
      process.stderr.write(`${err.stack || err}\n`);
      process.exit(1);
    }));
}

module.exports = { shortPath, runBench, benchCommand, standalone, usage, parseBenchArgs, UsageError, SUITES, REGISTRY, quickBudgetMs };
