'use strict';
// A seeded differential run of procwire's `advanced` encoder against Node's
// own IPC serializer (bench/lib/node-codec.js, built the way Node's
// child_process builds it), for issue 29 item 2. Each value is built twice
// from the same seed (its getters count their calls and may change their
// container, throw, or swap a prototype), one copy encoded by each side;
// the two must decode (with Node's deserializer) to the same value, throw
// alike, and have run every getter the same number of times. It prints the
// first mismatches and a count; exit code 1 when any.
//
//   node scripts/codec-differential.js [count=200000] [seed=1]
//
// Not part of test/: on today's code it finds mismatches (the fast path runs
// getters, then declines and hands V8 the changed value); it becomes
// test/codec-differential.test.js once the fast path declines before any
// user code runs.

const util = require('util');
const procwire = require('..');
const { nodeAdvancedEncode, nodeAdvancedDecode } = require('../bench/lib/node-codec');

const count = Number(process.argv[2] || 200000);
const seed = Number(process.argv[3] || 1);

// mulberry32: small, seeded, the same on every Node line.
function prng(state) {
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// The value for seed `s`, and the getter call counts it will record.
function build(s) {
  const rand = prng(s);
  const pick = (n) => Math.floor(rand() * n);
  const calls = [];
  function leaf() {
    switch (pick(7)) {
      case 0: return pick(100);
      case 1: return rand() * 1000;
      case 2: return `s${pick(50)}`;
      case 3: return pick(2) === 0;
      case 4: return null;
      case 5: return undefined;
      default: return -pick(1e6);
    }
  }
  function getterOn(container, key) {
    const id = calls.length;
    calls.push(0);
    const kind = pick(7);
    const value = leaf();
    Object.defineProperty(container, key, {
      enumerable: true,
      configurable: true,
      get() {
        calls[id]++;
        switch (kind) {
          case 0: if (Array.isArray(container)) container.length = pick(3); break;
          case 1: container[`added${id}`] = 1; break;
          case 2: for (const k of Object.keys(container)) { if (k !== String(key)) { delete container[k]; break; } } break;
          case 3: throw new Error(`getter ${id} threw`);
          case 4: Object.setPrototypeOf(container, pick(2) === 0 ? null : Map.prototype); break;
          default: break;
        }
        return value;
      },
    });
  }
  function node(depth) {
    const r = pick(10);
    if (depth > 3 || r < 4) return leaf();
    if (r < 7) {
      const a = [];
      const n = pick(5);
      for (let i = 0; i < n; i++) a.push(node(depth + 1));
      if (n > 0 && pick(3) === 0) getterOn(a, pick(n));
      return pick(12) === 0 ? new Proxy(a, {}) : a;
    }
    const o = pick(15) === 0 ? new Map([[1, 2]]) : {};
    const n = pick(5);
    for (let i = 0; i < n; i++) o[`k${i}`] = node(depth + 1);
    if (pick(3) === 0) getterOn(o, `g${pick(3)}`);
    return pick(12) === 0 ? new Proxy(o, {}) : o;
  }
  return { value: { root: node(0) }, calls };
}

function outcome(encode, s) {
  const { value, calls } = build(s);
  let result;
  try {
    result = { value: nodeAdvancedDecode(encode(value).subarray(4)) };
  } catch (err) {
    result = { threw: err.message };
  }
  return { ...result, calls };
}

let mismatches = 0;
for (let s = seed; s < seed + count; s++) {
  const mine = outcome((v) => procwire.codec.advanced.encode(v), s);
  const node = outcome(nodeAdvancedEncode, s);
  if (!util.isDeepStrictEqual(mine, node)) {
    if (++mismatches <= 5) {
      console.log(`seed ${s}:\n  procwire ${util.inspect(mine, { depth: 6 })}\n  node     ${util.inspect(node, { depth: 6 })}`);
    }
  }
}
console.log(`${mismatches} of ${count} values differ (seed ${seed})`);
process.exitCode = mismatches > 0 ? 1 : 0;
