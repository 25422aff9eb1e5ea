'use strict';
// A seeded generator for tests that draw random cases: a failure can be
// replayed from its seed, and the sequence is the same on every Node line.

// mulberry32: small, seeded, uniform in [0, 1).
function prng(state) {
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

module.exports = { prng };
