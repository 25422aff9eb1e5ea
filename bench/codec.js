'use strict';
// Codec operations/s: one message encoded to a whole frame and decoded back,
// in this process, for the message shapes real IPC carries (a 64 B string
// payload, an RPC-like { id, method, params } of about 200 B, an array of
// 100 numbers, a 1 KiB nested object, a 16 KiB string, a 64 KiB Buffer):
// procwire's codec (JavaScript fast path, ValueSerializer for the rest),
// procwire's ValueSerializer path alone, v8.serialize/deserialize, the path
// Node's child_process takes for each wire format, and JSON. Medians of
// interleaved repeats.
//
//   node bench/codec.js [--quick]

const v8 = require('v8');
const harness = require('./lib/harness');

const { nodeAdvancedEncode, nodeAdvancedDecode, nodeJsonEncode, nodeJsonDecode } = require('./lib/node-codec');

function nested1k() {
  const o = { user: { id: 42, name: 'Ann Example', email: 'ann@example.com', roles: ['admin', 'dev'] }, items: [] };
  for (let i = 0; i < 8; i++) {
    o.items.push({ sku: `sku-${i}`, qty: i + 1, price: 9.5 + i, tags: ['a', 'b'], meta: { created: 1700000000 + i, ok: true } });
  }
  return o;
}

// [id, label, () => value]
const SHAPES = [
  ['str64', '64 B string payload', () => ({ payload: 'x'.repeat(64) })],
  ['rpc', 'RPC { id, method, params } ~200 B', () => ({
    id: 1234, method: 'inventory.reserve',
    params: { sku: 'sku-000123', quantity: 3, warehouse: 'eu-west-1', priority: 'normal', note: 'deliver after 5pm', tags: ['gift', 'express'] },
  })],
  ['arr100', 'array of 100 numbers', () => Array.from({ length: 100 }, (_, i) => i * 37 - 1000)],
  ['nested1k', '1 KiB nested object', nested1k],
  ['str16k', '16 KiB string', () => ({ payload: 's'.repeat(16384) })],
  ['buf64k', '64 KiB Buffer', () => ({ payload: Buffer.alloc(65536, 7) })],
];

function codecs() {
  const procwire = require(harness.ROOT);
  const { binding } = require(`${harness.ROOT}/lib/native`);
  const pa = procwire.codec.advanced;
  const pj = procwire.codec.json;
  return [
    { id: 'procwire-advanced', label: 'procwire.codec.advanced (fast path)', run: (v) => pa.decode(pa.encode(v).subarray(4)) },
    { id: 'procwire-native', label: 'procwire ValueSerializer path', run: (v) => binding.decode(0, binding.encode(0, v).subarray(4)) },
    { id: 'v8-serialize', label: 'v8.serialize + v8.deserialize', run: (v) => v8.deserialize(v8.serialize(v)) },
    { id: 'node-advanced', label: "Node's advanced (v8 serializer)", run: (v) => nodeAdvancedDecode(nodeAdvancedEncode(v).subarray(4)) },
    { id: 'procwire-json', label: 'procwire.codec.json', json: true, run: (v) => { const b = pj.encode(v); return pj.decode(b.subarray(0, b.length - 1)); } },
    { id: 'node-json', label: "Node's json (JSON + UTF-8)", json: true, run: (v) => { const b = nodeJsonEncode(v); return nodeJsonDecode(b.subarray(0, b.length - 1)); } },
  ];
}

function opsPerSecond(run, value, ms) {
  let ops = 0;
  const t0 = harness.now();
  let t = t0;
  const deadline = t0 + ms;
  while (t < deadline) {
    for (let i = 0; i < 32; i++) run(value);
    ops += 32;
    t = harness.now();
  }
  return ops / ((t - t0) / 1000);
}

async function runInProcess({ quick, repeats, progress, budgetMs }) {
  const started = Date.now();
  const list = codecs();
  repeats = repeats || (quick ? 3 : 5);
  const ms = quick ? 60 : 120;
  const procwire = require(harness.ROOT);
  // x = the shape's advanced payload size (bytes), kept distinct.
  const xs = [];
  const shapeAt = {};
  for (const [, label, make] of SHAPES) {
    let x = procwire.codec.advanced.encode(make()).length - 4;
    while (shapeAt[x] !== undefined) x++;
    xs.push(x);
    shapeAt[x] = { label, make };
  }
  const jsonOk = (v) => !Buffer.isBuffer(v.payload);
  // Check every codec round-trips every value before timing it.
  for (const c of list) {
    for (const x of xs) {
      const v = shapeAt[x].make();
      if (c.json && !jsonOk(v)) continue;
      const back = c.run(v);
      if (JSON.stringify(back).length !== JSON.stringify(v).length) throw new Error(`${c.id} does not round-trip ${shapeAt[x].label}`);
      // Warm up long enough for the optimizing compiler to settle: after
      // 10 ms the first sample of the fast path still ran about 10% slow.
      opsPerSecond(c.run, v, 50);
    }
  }
  const samples = {};
  // Under --quick's time share, a repeat starts only if it still fits.
  const timed = Date.now();
  const planned = repeats;
  for (let rep = 0; rep < repeats; rep++) {
    const spent = Date.now() - timed;
    if (rep > 0 && budgetMs && spent + spent / rep > budgetMs - (timed - started)) {
      progress.tick((repeats - rep) * xs.length * list.length);
      repeats = rep;
      break;
    }
    for (const x of xs) {
      const value = shapeAt[x].make();
      for (const c of list) {
        if (c.json && !jsonOk(value)) { progress.tick(); continue; }
        progress.set(`codec: ${c.label} ${shapeAt[x].label} (run ${rep + 1}/${repeats})`);
        harness.collectGarbage();
        const v = opsPerSecond(c.run, value, ms);
        (((samples[c.id] ||= {})[x] ||= [])).push(v);
        progress.tick();
        await harness.sleep(0);
      }
    }
  }
  const data = {};
  for (const c of list) {
    data[c.id] = {};
    for (const x of xs) {
      const s = samples[c.id] && samples[c.id][x];
      if (s) data[c.id][x] = { ops: { median: harness.median(s), samples: s } };
    }
  }
  return {
    name: 'codec',
    title: 'Codec: encode + decode operations/s per message shape',
    description: "One message encoded to a whole frame and decoded back, in one process: procwire's codec (JavaScript " +
      'fast path first) and its ValueSerializer path, v8.serialize/deserialize, the path Node\'s child_process takes ' +
      '(v8.DefaultSerializer subclass; JSON + UTF-8), and JSON. Higher is better.',
    xs,
    xLabel: 'shape (advanced payload bytes)',
    xUnit: 'bytes',
    // Each x is a different message shape, not a size of one: points, no lines.
    categorical: true,
    metrics: [{ id: 'ops', label: 'ops/s', unit: '/s', better: 'higher' }],
    peers: list.map((c) => ({ id: c.id, label: c.label, status: 'ok' })),
    data,
    histograms: {},
    ratioTo: ['procwire-advanced', 'node-advanced', 'node-json'],
    pairs: [['procwire-advanced', 'procwire-native'], ['procwire-advanced', 'node-advanced'],
      ['procwire-advanced', 'node-json'], ['procwire-json', 'node-json']],
    notes: [`each sample: ${ms} ms of encode + decode in a loop, after a full garbage collection; medians of ${repeats} interleaved repeats`,
      `shapes: ${xs.map((x) => `${x} B = ${shapeAt[x].label}`).join('; ')}`,
      'json rows skip the Buffer shape (JSON has no binary)',
      'the machine is shared with other work: compare ratios from one run',
      ...(repeats < planned ? [`--quick: ${repeats} of ${planned} repeats fitted this suite's ${budgetMs / 1000} s`] : [])],
    repeats,
    seconds: (Date.now() - started) / 1000,
  };
}

function ticks({ quick, repeats }) {
  return (repeats || (quick ? 3 : 5)) * SHAPES.length * 6;
}

module.exports = { name: 'codec', inProcess: true, runInProcess, ticks, nodeAdvancedEncode, nodeAdvancedDecode, SHAPES };

if (require.main === module) {
  require('./lib/cli').standalone('codec');
}
