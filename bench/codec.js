'use strict';
// The short demo (`npm run demo`): encode + decode operations/s of one
// { payload: string } message, procwire's native codecs against the path
// Node's child_process takes for the same wire format. Runs in this process,
// median of 5 interleaved repeats, well under 30 s.
//
//   node bench/codec.js [--quick]

const harness = require('./lib/harness');

const SIZES = [64, 1024, 16384, 65536];

const { nodeAdvancedEncode, nodeAdvancedDecode, nodeJsonEncode, nodeJsonDecode } = require('./lib/node-codec');

function codecs() {
  const procwire = require(harness.ROOT);
  const pa = procwire.codec.advanced;
  const pj = procwire.codec.json;
  return [
    { id: 'procwire-advanced', label: 'procwire.codec.advanced', run: (v) => pa.decode(pa.encode(v).subarray(4)) },
    { id: 'node-advanced', label: "Node's advanced (v8 serializer)", run: (v) => nodeAdvancedDecode(nodeAdvancedEncode(v).subarray(4)) },
    { id: 'procwire-json', label: 'procwire.codec.json', run: (v) => { const b = pj.encode(v); return pj.decode(b.subarray(0, b.length - 1)); } },
    { id: 'node-json', label: "Node's json (JSON + UTF-8)", run: (v) => { const b = nodeJsonEncode(v); return nodeJsonDecode(b.subarray(0, b.length - 1)); } },
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

async function runInProcess({ quick, repeats, progress }) {
  const started = Date.now();
  const list = codecs();
  repeats = repeats || (quick ? 3 : 5);
  const ms = quick ? 60 : 200;
  const samples = {};
  // Check every codec round-trips the value before timing it.
  for (const c of list) {
    for (const len of SIZES) {
      const back = c.run({ payload: '.'.repeat(len) });
      if (!back || back.payload.length !== len) throw new Error(`${c.id} does not round-trip ${len} B`);
      opsPerSecond(c.run, { payload: '.'.repeat(len) }, 10);  // warm up
    }
  }
  for (let rep = 0; rep < repeats; rep++) {
    for (const len of SIZES) {
      const value = { payload: '.'.repeat(len) };
      for (const c of list) {
        progress.set(`codec: ${c.label} ${harness.fmtSize(len)} (run ${rep + 1}/${repeats})`);
        const v = opsPerSecond(c.run, value, ms);
        (((samples[c.id] ||= {})[len] ||= [])).push(v);
        progress.tick();
        await harness.sleep(0);
      }
    }
  }
  const data = {};
  for (const c of list) {
    data[c.id] = {};
    for (const len of SIZES) {
      const s = samples[c.id][len];
      data[c.id][len] = { ops: { median: harness.median(s), samples: s } };
    }
  }
  return {
    name: 'codec',
    title: 'Codec: encode + decode operations/s of { payload: string }',
    description: "One message encoded to a whole frame and decoded back, in one process: procwire's native codecs " +
      "against the path Node's child_process takes (v8.DefaultSerializer subclass; JSON + UTF-8). Higher is better.",
    xs: SIZES,
    xLabel: 'payload',
    xUnit: 'bytes',
    metrics: [{ id: 'ops', label: 'ops/s', unit: '/s', better: 'higher' }],
    peers: list.map((c) => ({ id: c.id, label: c.label, status: 'ok' })),
    data,
    histograms: {},
    ratioTo: ['procwire-advanced', 'node-advanced', 'node-json'],
    pairs: [['procwire-advanced', 'node-advanced'], ['procwire-json', 'node-json']],
    notes: [`each sample: ${ms} ms of encode + decode in a loop`],
    repeats,
    seconds: (Date.now() - started) / 1000,
  };
}

function ticks({ quick, repeats }) {
  return (repeats || (quick ? 3 : 5)) * SIZES.length * 4;
}

module.exports = { name: 'codec', inProcess: true, runInProcess, ticks, nodeAdvancedEncode, nodeAdvancedDecode };

if (require.main === module) {
  require('./lib/cli').standalone('codec');
}
