'use strict';
// node scripts/codec-arrays-ab.js [repeats] name=<procwire checkout> ...: CPU
// time (user + system) per encode and per decode of procwire.codec.advanced,
// in ns, for arrays of numbers (10, 100 and 127 small ints or doubles, 100
// mixed) and, as a guard, the 64 B string and RPC messages of
// bench/codec.js. Each checkout runs in a child process of its own, the
// checkouts taking turns (A B C, C B A, ...); the medians are printed with
// each checkout's ratio to the first. CPU time, unlike wall time, barely
// moves on a loaded machine, so checkouts (git worktrees of older commits)
// can be compared there. SHAPES=ints100,dbl100 picks shapes; MS=80 sets
// each sample's CPU time.
//
//   node scripts/codec-arrays-ab.js 7 before=/work/wt/old after=.

const path = require('path');
const { execFileSync } = require('child_process');

const ints = (n) => Array.from({ length: n }, (_, i) => i * 37 - 1000);
const doubles = (n) => Array.from({ length: n }, (_, i) => i * 0.37 + 0.5);
const SHAPES = {
  ints10: () => ints(10),
  ints100: () => ints(100),
  ints127: () => ints(127),
  dbl10: () => doubles(10),
  dbl100: () => doubles(100),
  dbl127: () => doubles(127),
  mix100: () => Array.from({ length: 100 }, (_, i) => (i % 2 ? i * 0.5 + 0.25 : i)),
  objs20: () => Array.from({ length: 20 }, (_, i) => ({ id: i, n: `x${i}` })),
  str64: () => ({ payload: 'x'.repeat(64) }),
  rpc: () => ({
    id: 1234, method: 'inventory.reserve',
    params: { sku: 'sku-000123', quantity: 3, warehouse: 'eu-west-1', priority: 'normal', note: 'deliver after 5pm', tags: ['gift', 'express'] },
  }),
};

function cpuMicros() {
  const u = process.cpuUsage();
  return u.user + u.system;
}

// ns of CPU time per call of fn, over `ms` of CPU time.
function nsPerCall(fn, ms) {
  let n = 0;
  const t0 = cpuMicros();
  let t = t0;
  while (t - t0 < ms * 1000) {
    for (let i = 0; i < 64; i++) fn();
    n += 64;
    t = cpuMicros();
  }
  return ((t - t0) * 1000) / n;
}

// In the child: one sample of every shape, for the checkout at `root`.
function sample(root, shapes, ms) {
  const codec = require(path.resolve(root)).codec.advanced;
  const out = {};
  let sink = 0;
  for (const name of shapes) {
    const value = SHAPES[name]();
    const payload = codec.encode(value).subarray(4);
    const encode = () => { sink += codec.encode(value).length; };
    const decode = () => { sink += codec.decode(payload) === null ? 1 : 0; };
    // Warm-up, so that the optimizing compiler has settled.
    nsPerCall(encode, ms);
    nsPerCall(decode, ms);
    out[name] = { encode: nsPerCall(encode, ms), decode: nsPerCall(decode, ms) };
  }
  out.sink = sink;
  return out;
}

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  return s[s.length >> 1];
}

function main() {
  const args = process.argv.slice(2);
  const repeats = /^\d+$/.test(args[0]) ? Number(args.shift()) : 5;
  const checkouts = args.map((a) => a.split('='));
  const shapes = process.env.SHAPES ? process.env.SHAPES.split(',') : Object.keys(SHAPES);
  const ms = Number(process.env.MS) || 80;
  const samples = {};
  for (let r = 0; r < repeats; r++) {
    for (const [name, root] of r % 2 ? [...checkouts].reverse() : checkouts) {
      const json = execFileSync(process.execPath, [__filename, '--child', root, shapes.join(','), String(ms)]);
      const got = JSON.parse(json);
      for (const shape of shapes) {
        for (const op of ['encode', 'decode']) ((samples[`${shape} ${op}`] ||= {})[name] ||= []).push(got[shape][op]);
      }
    }
  }
  const names = checkouts.map(([name]) => name);
  console.log(['ns/op (CPU)', ...names, ...names.slice(1).map((n) => `${names[0]}÷${n}`)].join('\t'));
  for (const [row, byName] of Object.entries(samples)) {
    const m = names.map((n) => median(byName[n]));
    console.log([row, ...m.map((x) => x.toFixed(0)), ...m.slice(1).map((x) => `×${(m[0] / x).toFixed(2)}`)].join('\t'));
  }
}

if (process.argv[2] === '--child') {
  const [, , , root, shapes, ms] = process.argv;
  process.stdout.write(JSON.stringify(sample(root, shapes.split(','), Number(ms))));
} else {
  main();
}
