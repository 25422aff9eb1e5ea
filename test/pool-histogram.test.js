'use strict';
// lib/pool/histogram.js, which counts a run of equal values once, against
// the same histogram fed one value at a time: runs of repeats (the tasks of
// a batch), single values, NaN, negatives and values past its range, with
// summaries read in the middle of a run as well as at the end.

const test = require('node:test');
const assert = require('node:assert');
const { prng } = require('./helpers/prng');
const { Histogram } = require('../lib/pool/histogram');

// Each value added on its own, as a run of one (the way the histogram adds
// a value before it counted runs).
function oneByOne(values) {
  const h = new Histogram();
  for (const v of values) {
    h.lastMs = v;
    h.repeats = 1;
    h.addRepeats();
  }
  return h;
}

test('a histogram that counts runs of equal values reports what one fed value by value does', () => {
  const random = prng(7);
  const values = [];
  const pool = [0, 0.0004, 0.25, 1.5, 3, 1234.5678, NaN, -2, 3e9];
  while (values.length < 20000) {
    const v = random() < 0.2 ? random() * 50 : pool[Math.floor(random() * pool.length)];
    const run = 1 + Math.floor(random() * 40);
    for (let i = 0; i < run; i++) values.push(v);
  }
  const h = new Histogram();
  for (let i = 0; i < values.length; i++) {
    h.record(values[i]);
    // Read in the middle of a run: what is pending is counted, and the run
    // goes on being counted afterwards.
    if (i === 5000 || i === 12345) assert.strictEqual(h.summary().count, i + 1);
  }
  const reference = oneByOne(values);
  const s = h.summary();
  assert.deepStrictEqual(s, reference.summary());
  assert.deepStrictEqual([...h.counts], [...reference.counts]);
  assert.strictEqual(s.count, values.length);
  const us = values.map((v) => {
    const r = Math.round(v * 1000);
    return !(r >= 0) ? 0 : Math.min(r, 0x7fffffff);
  });
  assert.strictEqual(s.min, Math.min(...us) / 1000);
  assert.strictEqual(s.max, Math.max(...us) / 1000);
  assert.strictEqual(s.mean, us.reduce((a, b) => a + b, 0) / us.length / 1000);
  for (const p of [0.5, 0.9, 0.99, 0.999]) assert.strictEqual(h.percentile(p), reference.percentile(p), `p${p}`);
});

test('an empty histogram and one of a single run report as before', () => {
  assert.deepStrictEqual(new Histogram().summary(), { count: 0, min: 0, max: 0, mean: 0, p50: 0, p90: 0, p99: 0, p999: 0 });
  const h = new Histogram();
  for (let i = 0; i < 1000; i++) h.record(0.123);
  assert.deepStrictEqual(h.summary(), { count: 1000, min: 0.123, max: 0.123, mean: 0.123, p50: 0.123, p90: 0.123, p99: 0.123, p999: 0.123 });
});
