'use strict';
// A channel's statistics, by name. Every handle's stats() returns one array
// of numbers in the layout below (src/core/channel_stats.h defines it for the
// addon, which exports it as binding.statsLayout; test/layout.test.js checks
// that the two agree). The JavaScript handles (stream, fallback, NATS) fill it
// with newStats()/setStat(), and Channel turns it into the public stats()
// object in publicStats(), the one place that shape is built (docs/stats.md,
// index.d.ts).

const HISTOGRAM_BUCKETS = 32;

const FIELDS = [
  'messagesIn', 'messagesOut', 'bytesIn', 'bytesOut', 'queuedBytes', 'writeCalls', 'readCalls',
  'decodeErrors', 'bufferedBytes', 'histogramIn', 'histogramOut', 'outOfLineMessagesOut',
  'outOfLineBytesOut', 'outOfLineMessagesIn', 'outOfLineBytesIn', 'ringsEnabled', 'ringMessagesOut',
  'ringMessagesIn',
];
const HISTOGRAMS = new Set(['histogramIn', 'histogramOut']);

// name -> index, plus histogramBuckets and length, as binding.statsLayout.
const STATS = (() => {
  const layout = {};
  let i = 0;
  for (const name of FIELDS) {
    layout[name] = i;
    i += HISTOGRAMS.has(name) ? HISTOGRAM_BUCKETS : 1;
  }
  layout.histogramBuckets = HISTOGRAM_BUCKETS;
  layout.length = i;
  return Object.freeze(layout);
})();

// A zeroed stats array.
function newStats() {
  return new Array(STATS.length).fill(0);
}

// Bucket of a message of `size` frame bytes: bucket i holds [2^i, 2^(i+1)),
// bucket 0 also 0 and 1, the last everything larger.
function sizeBucket(size) {
  if (size <= 1) return 0;
  const b = size < 2 ** 32 ? 31 - Math.clz32(size) : Math.floor(Math.log2(size));
  return b >= HISTOGRAM_BUCKETS ? HISTOGRAM_BUCKETS - 1 : b;
}

function histogram(s, first) {
  const out = [];
  for (let i = 0; i < HISTOGRAM_BUCKETS; i++) {
    const count = s[first + i] || 0;
    if (count === 0) continue;
    // Bucket i holds sizes in [2^i, 2^(i+1)) (bucket 0 also holds 0 and 1).
    out.push({ min: i === 0 ? 0 : 2 ** i, max: 2 ** (i + 1) - 1, count });
  }
  return out;
}

// The public stats() object from a handle's array and what only the
// Channel knows (pending requests, whether out-of-line is on, frames that
// failed to decode in JavaScript).
function publicStats(s, { pendingRequests, outOfLineEnabled, decodeErrorsInJs }) {
  return {
    messagesIn: s[STATS.messagesIn],
    messagesOut: s[STATS.messagesOut],
    bytesIn: s[STATS.bytesIn],
    bytesOut: s[STATS.bytesOut],
    queuedBytes: s[STATS.queuedBytes],
    writeCalls: s[STATS.writeCalls],
    readCalls: s[STATS.readCalls],
    decodeErrors: s[STATS.decodeErrors] + decodeErrorsInJs,
    bufferedBytes: s[STATS.bufferedBytes],
    pendingRequests,
    outOfLine: {
      enabled: outOfLineEnabled,
      messagesOut: s[STATS.outOfLineMessagesOut] || 0,
      bytesOut: s[STATS.outOfLineBytesOut] || 0,
      messagesIn: s[STATS.outOfLineMessagesIn] || 0,
      bytesIn: s[STATS.outOfLineBytesIn] || 0,
    },
    // Shared-memory rings (procwire peers on one host): on once both
    // directions are set up; messages that took a ring each way.
    rings: {
      enabled: s[STATS.ringsEnabled] === 1,
      messagesOut: s[STATS.ringMessagesOut] || 0,
      messagesIn: s[STATS.ringMessagesIn] || 0,
    },
    // Message sizes (frame bytes) in log2-spaced buckets, like Chromium's
    // IPC.MessageSize histogram.
    histogram: { in: histogram(s, STATS.histogramIn), out: histogram(s, STATS.histogramOut) },
  };
}

// The stats array of a backend that counts in JavaScript (stream, NATS):
// `counts` holds messagesIn/Out, bytesIn/Out, writeCalls, readCalls and
// decodeErrors; `extra` the byte gauges and the two size histograms.
function countedStats(counts, { bytesOut, queuedBytes, bufferedBytes, histogramIn, histogramOut }) {
  const out = newStats();
  out[STATS.messagesIn] = counts.messagesIn;
  out[STATS.messagesOut] = counts.messagesOut;
  out[STATS.bytesIn] = counts.bytesIn;
  out[STATS.bytesOut] = bytesOut;
  out[STATS.queuedBytes] = queuedBytes;
  out[STATS.writeCalls] = counts.writeCalls;
  out[STATS.readCalls] = counts.readCalls;
  out[STATS.decodeErrors] = counts.decodeErrors;
  out[STATS.bufferedBytes] = bufferedBytes;
  for (let i = 0; i < HISTOGRAM_BUCKETS; i++) {
    out[STATS.histogramIn + i] = histogramIn[i];
    out[STATS.histogramOut + i] = histogramOut[i];
  }
  return out;
}

module.exports = { STATS, HISTOGRAM_BUCKETS, newStats, countedStats, sizeBucket, publicStats };
