'use strict';
// Runs a set of suites (for `procwire bench` and for each suite file run on
// its own) and writes / prints the report.

const os = require('os');
const path = require('path');
const harness = require('./harness');

const SUITES = ['codec', 'roundtrip', 'master-worker', 'latency', 'bulk', 'cluster-http'];

function procwireVersion() {
  try { return require(path.join(harness.ROOT, 'package.json')).version; } catch { return '?'; }
}

// Every run of one bench uses the same addon binary: a copy of the built
// one, taken at the start (a rebuild during the run cannot mix binaries or
// leave a run without one). Drivers and their children inherit
// PROCWIRE_ADDON, which lib/native.js loads first. A user's own
// PROCWIRE_ADDON is left alone.
async function pinAddon(tmp, log) {
  if (process.env.PROCWIRE_ADDON) return;
  const fs = require('fs');
  const built = path.join(harness.ROOT, 'build', 'Release', 'procwire.node');
  const copy = path.join(tmp, 'procwire.node');
  // A build that is being replaced right now gets a few seconds to finish.
  for (let attempt = 0; attempt < 10; attempt++) {
    try {
      fs.copyFileSync(built, copy);
      require(copy);
      process.env.PROCWIRE_ADDON = copy;
      return;
    } catch (err) {
      if (attempt === 9 || (err.code === 'ENOENT' && !fs.existsSync(path.dirname(built)))) {
        log(`note: procwire's addon is not pinned (${String(err.message).split('\n')[0]}); procwire rows may fail`);
        return;
      }
      await harness.sleep(3000);
    }
  }
}

// options: { quick, suites: [names], out (dir or null), repeats, args, print }
async function runBench(options) {
  const quick = Boolean(options.quick);
  const names = options.suites || SUITES;
  for (const n of names) {
    if (!SUITES.includes(n)) throw new Error(`unknown suite "${n}" (suites: ${SUITES.join(', ')})`);
  }
  const started = Date.now();
  const progress = new harness.Progress(0);
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
        prepared.push({ name, mod });
        progress.addTotal(mod.ticks({ quick, repeats: options.repeats }));
        continue;
      }
      try {
        const plan = await mod.plan({ quick, repeats: options.repeats, log, tmp, args: options.args || {} });
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
          ? await p.mod.runInProcess({ quick, repeats: options.repeats, progress, log })
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

async function benchCommand(argv) {
  const args = harness.parseArgs(argv);
  if (args.help || args.h) {
    process.stdout.write(usage());
    return 0;
  }
  const suites = typeof args.suite === 'string' ? args.suite.split(',').map((s) => s.trim()).filter(Boolean) : undefined;
  const report = require('../report');
  const results = await runBench({
    quick: Boolean(args.quick),
    suites,
    repeats: args.repeats ? Number(args.repeats) : undefined,
    args,
  });
  const out = typeof args.out === 'string'
    ? path.resolve(args.out)
    : path.resolve('bench-results', results.date);
  const files = report.writeReport(results, out);
  process.stdout.write(`${report.toMarkdown(results)}\n`);
  process.stderr.write(`\nwrote ${files.map((f) => path.relative(process.cwd(), f) || f).join(', ')}\n`);
  return 0;
}

function usage() {
  return [
    'usage:',
    '  procwire bench [--quick] [--suite codec,roundtrip,master-worker,latency,bulk,cluster-http] [--out dir] [--repeats n]',
    '      runs the suites (default: all, full grid; --quick: under 3 minutes) and writes',
    '      <out or bench-results/YYYY-MM-DD>/results.json, results.md and one SVG per suite',
    '  procwire stats <results.json>',
    '      prints the message-size histograms recorded in a run',
    '',
  ].join('\n');
}

// `node bench/<suite>.js [--quick] [--out dir]`: that suite alone, tables on stdout.
function standalone(name) {
  const args = harness.parseArgs(process.argv.slice(2));
  const report = require('../report');
  // Deferred: the suite file that called us must finish loading first.
  setImmediate(() => runBench({ quick: Boolean(args.quick), suites: [name], repeats: args.repeats ? Number(args.repeats) : undefined, args })
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

module.exports = { runBench, benchCommand, standalone, usage, SUITES };
