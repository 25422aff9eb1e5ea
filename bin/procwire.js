#!/usr/bin/env node
'use strict';
// procwire's command line:
//   procwire bench [--quick] [--suite a,b] [--out dir] [--repeats n]
//   procwire stats <results.json | results dir>

const fs = require('fs');
const path = require('path');

function stats(file) {
  if (!file) throw new Error('usage: procwire stats <results.json>');
  if (fs.existsSync(file) && fs.statSync(file).isDirectory()) file = path.join(file, 'results.json');
  const results = JSON.parse(fs.readFileSync(file, 'utf8'));
  const { histogramText } = require('../bench/report');
  const out = [];
  out.push(`Message sizes recorded by procwire channels (channel.stats().histogram; frame bytes, log2 buckets)`);
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

async function main(argv) {
  const cmd = argv[0];
  const cli = require('../bench/lib/cli');
  if (cmd === 'bench') return cli.benchCommand(argv.slice(1));
  if (cmd === 'stats') return stats(argv[1]);
  process.stdout.write(cli.usage());
  return cmd === undefined || cmd === 'help' || cmd === '--help' || cmd === '-h' ? 0 : 2;
}

main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
}, (err) => {
  process.stderr.write(`procwire: ${err && err.message ? err.message : err}\n`);
  process.exitCode = 1;
});
