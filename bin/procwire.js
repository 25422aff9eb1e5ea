#!/usr/bin/env node
'use strict';
// procwire's command line:
//   procwire bench [--quick] [--suite a,b] [--out dir] [--repeats n]
//   procwire report <results.json | results dir> [--out dir]
//   procwire stats <results.json | results dir>
//   procwire --version | --help
// Exit status: 0 done, 1 the command failed, 2 a usage mistake (an unknown
// command or option, a bad option value).

const fs = require('fs');
const path = require('path');

// A mistake on the command line (the bench's own parser throws its
// subclass of Error with the same meaning).
class UsageError extends Error {}

function version() {
  return require(path.join(__dirname, '..', 'package.json')).version;
}

// A run's results.json, given either the file or the directory it is in.
function readResults(arg, command) {
  if (!arg) throw new UsageError(`${command} needs a results.json file or the directory it is in`);
  let file = arg;
  if (fs.existsSync(file) && fs.statSync(file).isDirectory()) file = path.join(file, 'results.json');
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`cannot read ${file}: ${err.code === 'ENOENT' ? 'no such file' : err.message}`, { cause: err });
  }
  let results;
  try {
    results = JSON.parse(text);
  } catch (err) {
    throw new Error(`${file} is not JSON: ${err.message}`, { cause: err });
  }
  if (!results || typeof results !== 'object' || !results.suites || typeof results.suites !== 'object') {
    throw new Error(`${file} is not a procwire bench results file (no "suites")`);
  }
  return { file, results };
}

function stats(argv) {
  if (argv.length > 1) throw new UsageError(`stats takes one file or directory (got ${argv.length})`);
  const { file, results } = readResults(argv[0], 'stats');
  const { histogramText } = require('../bench/report');
  const out = [];
  out.push('Message sizes recorded by procwire channels (channel.stats().histogram; frame bytes, log2 buckets)');
  out.push(`run: ${results.date}${results.meta && results.meta.quick ? ' (quick)' : ''}, ${file}`);
  let any = false;
  for (const suite of Object.values(results.suites || {})) {
    const hs = suite.histograms || {};
    for (const [peerId, h] of Object.entries(hs)) {
      any = true;
      const peer = (suite.peers || []).find((p) => p.id === peerId);
      const label = peer ? peer.label : peerId;
      for (const dir of ['out', 'in']) {
        const buckets = h[dir] || [];
        const total = buckets.reduce((s, b) => s + b.count, 0);
        out.push('', `${suite.name} / ${label} / ${dir === 'out' ? 'sent' : 'received'} by the bench side: ${total} messages`);
        out.push(histogramText(buckets));
      }
    }
  }
  if (!any) out.push('', 'no histograms in this file (only procwire peers record them)');
  process.stdout.write(`${out.join('\n')}\n`);
  return 0;
}

// Renders results.md and the charts again from a run's results.json, with
// this version's report code, without running anything.
function report(argv) {
  let parsed;
  try {
    parsed = require('util').parseArgs({ args: argv, options: { out: { type: 'string' } }, strict: true, allowPositionals: true });
  } catch (err) {
    throw new UsageError(String(err.message).split('\n')[0]);
  }
  if (parsed.positionals.length !== 1) throw new UsageError('report takes one results.json file or directory');
  const { file, results } = readResults(parsed.positionals[0], 'report');
  const out = parsed.values.out ? path.resolve(parsed.values.out) : path.dirname(path.resolve(file));
  const files = require('../bench/report').writeReport(results, out, { json: path.resolve(out, 'results.json') !== path.resolve(file) });
  process.stderr.write(`wrote ${files.map(require('../bench/lib/cli').shortPath).join(', ')}\n`);
  return 0;
}

async function main(argv) {
  const cmd = argv[0];
  if (cmd === '--version' || cmd === '-v' || cmd === 'version') {
    process.stdout.write(`${version()}\n`);
    return 0;
  }
  const cli = require('../bench/lib/cli');
  if (cmd === undefined || cmd === 'help' || cmd === '--help' || cmd === '-h') {
    process.stdout.write(cli.usage());
    return 0;
  }
  try {
    if (cmd === 'bench') return await cli.benchCommand(argv.slice(1));
    if (cmd === 'stats') return stats(argv.slice(1));
    if (cmd === 'report') return report(argv.slice(1));
    throw new UsageError(cmd.startsWith('-') ? `unknown option "${cmd}"` : `unknown command "${cmd}"`);
  } catch (err) {
    if (!(err instanceof UsageError || err instanceof cli.UsageError)) throw err;
    process.stderr.write(`procwire: ${err.message}\n\n${cli.usage()}`);
    return 2;
  }
}

main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
}, (err) => {
  process.stderr.write(`procwire: ${err && err.message ? err.message : err}\n`);
  process.exitCode = 1;
});
