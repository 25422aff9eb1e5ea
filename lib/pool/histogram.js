'use strict';
// A log-linear histogram of durations for the pool's stats: recording is a
// few integer operations into a fixed array (no allocation, no sorting), and
// percentiles come from one scan when someone asks. Values are kept in whole
// microseconds: below 64 µs exactly, above that in 32 sub-buckets per power
// of two, so a percentile is within about 3% of the true value.

const LINEAR = 64;          // values below this have a bucket each
const SUB_BITS = 5;         // 32 sub-buckets per power of two above it
const SUB = 1 << SUB_BITS;
const FIRST_EXP = 6;        // 2 ** 6 === LINEAR
const MAX_US = 0x7fffffff;  // about 35 minutes; longer durations count there
const BUCKETS = LINEAR + (31 - FIRST_EXP) * SUB;

function bucketOf(us) {
  if (us < LINEAR) return us;
  const exp = 31 - Math.clz32(us);
  return LINEAR + (exp - FIRST_EXP) * SUB + ((us >>> (exp - SUB_BITS)) & (SUB - 1));
}

// The middle of a bucket, in microseconds.
function valueOf(bucket) {
  if (bucket < LINEAR) return bucket;
  const exp = FIRST_EXP + Math.floor((bucket - LINEAR) / SUB);
  const sub = (bucket - LINEAR) % SUB;
  const width = 2 ** (exp - SUB_BITS);
  return (SUB + sub) * width + width / 2;
}

// The pool's clock: performance.now(), read once per batch of work rather
// than per task. The reading is kept until the current microtask checkpoint
// (a batch of replies delivered together, or a synchronous burst of run()
// calls, shares one reading), so timings are exact to one batch, and a
// task costs no clock call of its own. A task keeps the reading object
// itself (batchReading()), not its number: a number field of a task is a
// heap number of its own, one allocation per field and task, where every
// task of a batch can point at the one object.
let reading = null;
function forget() {
  reading = null;
}
// -> { at }: the reading of this batch, in milliseconds.
function batchReading() {
  if (reading === null) {
    reading = { at: performance.now() };
    queueMicrotask(forget);
  }
  return reading;
}
function batchNow() {
  return batchReading().at;
}

class Histogram {
  constructor() {
    this.counts = new Uint32Array(BUCKETS);
    this.count = 0;
    this.sum = 0;
    this.min = Infinity;
    this.max = 0;
    // The last value recorded and how many times in a row, not yet added
    // to the counts above: the tasks of a batch started and answered
    // together have the same duration (one clock reading each side), so
    // most records are a comparison and an increment.
    this.lastMs = NaN;
    this.repeats = 0;
  }

  // ms: a duration in milliseconds (from performance.now() differences).
  record(ms) {
    if (ms === this.lastMs) {
      this.repeats++;
      return;
    }
    this.addRepeats();
    this.lastMs = ms;
    this.repeats = 1;
  }

  // Adds the pending run of equal values to the counts.
  addRepeats() {
    const n = this.repeats;
    if (n === 0) return;
    this.repeats = 0;
    let us = Math.round(this.lastMs * 1000);
    if (!(us >= 0)) us = 0;
    else if (us > MAX_US) us = MAX_US;
    this.counts[bucketOf(us)] += n;
    this.count += n;
    this.sum += us * n;
    if (us < this.min) this.min = us;
    if (us > this.max) this.max = us;
  }

  // The value below which a fraction p (0..1) of the recorded values lie,
  // in milliseconds; 0 when nothing was recorded.
  percentile(p) {
    this.addRepeats();
    if (this.count === 0) return 0;
    const rank = Math.max(1, Math.ceil(p * this.count));
    let seen = 0;
    for (let b = 0; b < BUCKETS; b++) {
      seen += this.counts[b];
      if (seen >= rank) return Math.min(this.max, Math.max(this.min, valueOf(b))) / 1000;
    }
    return this.max / 1000;
  }

  // What pool.stats() reports: milliseconds throughout.
  summary() {
    this.addRepeats();
    const empty = this.count === 0;
    return {
      count: this.count,
      min: empty ? 0 : this.min / 1000,
      max: this.max / 1000,
      mean: empty ? 0 : this.sum / this.count / 1000,
      p50: this.percentile(0.5),
      p90: this.percentile(0.9),
      p99: this.percentile(0.99),
      p999: this.percentile(0.999),
    };
  }
}

module.exports = { Histogram, batchNow, batchReading };
