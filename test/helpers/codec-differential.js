'use strict';
// The differential run of procwire's `advanced` encoder against Node's own
// IPC serializer (bench/lib/node-codec.js, built the way Node's
// child_process builds it), for issue 29 item 2; used by
// test/codec-differential.test.js and scripts/codec-differential.js.
//
// Each value is built twice from the same seed, one copy encoded by each
// side. Its getters count their calls and may change their container or an
// ancestor (array length, keys added or deleted, a getter added, the
// prototype swapped), replace themselves, or throw; some arrays have holes,
// some objects are proxies whose traps count their calls, some values are
// Maps, Dates or views (which the fast path declines or writes). Both sides
// must decode (with Node's deserializer) to the same value, or throw the
// same error (the getter's own error object, or the same message), and
// every getter and trap must have run the same number of times.

const util = require('util');
const procwire = require('../..');
const { nodeAdvancedEncode, nodeAdvancedDecode } = require('../../bench/lib/node-codec');

const { prng } = require('./prng');

// The value for seed `s`, the getter and trap call counts it will record,
// and the errors its getters throw.
function build(s) {
  const rand = prng(s);
  const pick = (n) => Math.floor(rand() * n);
  const calls = [];
  const errors = [];
  function leaf() {
    switch (pick(9)) {
      case 0: return pick(100);
      case 1: return rand() * 1000;
      case 2: return `s${pick(50)}`;
      case 3: return pick(2) === 0;
      case 4: return null;
      case 5: return undefined;
      case 6: return pick(2) === 0 ? new Date(pick(1e9)) : Buffer.from([pick(256), 1]);
      case 7: return pick(4) === 0 ? new Map([[1, 2]]) : 'x'.repeat(pick(40));
      default: return -pick(1e6);
    }
  }
  function counter() {
    calls.push(0);
    return calls.length - 1;
  }
  // A getter on container[key]; `ancestors` are the containers above it.
  function getterOn(container, key, ancestors) {
    const id = counter();
    const kind = pick(11);
    const value = pick(5) === 0 ? node(3, [...ancestors, container]) : leaf();
    const keep = pick(3);
    const desc = {
      enumerable: pick(8) !== 0,
      configurable: true,
      get() {
        calls[id]++;
        switch (kind) {
          case 0:
            if (Array.isArray(container)) container.length = keep;
            else for (const k of Object.keys(container).slice(keep)) delete container[k];
            break;
          case 1: container[Array.isArray(container) ? container.length + keep : `added${id}`] = id; break;
          case 2: for (const k of Object.keys(container)) { if (k !== String(key)) { delete container[k]; break; } } break;
          case 3: {
            const err = new Error(`getter ${id} threw`);
            errors[id] = err;
            throw err;
          }
          case 4: Object.setPrototypeOf(container, [null, Map.prototype, Array.prototype, Object.prototype][keep]); break;
          case 5: Object.defineProperty(container, key, { value: 'replaced', enumerable: true, configurable: true, writable: true }); break;
          case 6: {
            const up = ancestors[ancestors.length - 1 - (keep % Math.max(1, ancestors.length))];
            if (up === undefined) break;
            if (Array.isArray(up)) up.length = keep;
            else up[`fromBelow${id}`] = keep;
            break;
          }
          case 7: {
            // A getter that adds a getter after itself.
            const later = counter();
            Object.defineProperty(container, Array.isArray(container) ? container.length : `late${id}`, {
              enumerable: true, configurable: true, get() { calls[later]++; return later; },
            });
            break;
          }
          default: break;
        }
        return value;
      },
    };
    if (pick(10) === 0) desc.set = () => { calls[id] += 100; };
    if (pick(15) === 0) delete desc.get;  // a setter alone reads as undefined
    Object.defineProperty(container, key, desc);
  }
  function proxied(target) {
    const id = counter();
    const count = () => { calls[id]++; };
    return new Proxy(target, {
      get(t, k, r) { count(); return Reflect.get(t, k, r); },
      ownKeys(t) { count(); return Reflect.ownKeys(t); },
      getOwnPropertyDescriptor(t, k) { count(); return Reflect.getOwnPropertyDescriptor(t, k); },
      getPrototypeOf(t) { count(); return Reflect.getPrototypeOf(t); },
      has(t, k) { count(); return Reflect.has(t, k); },
    });
  }
  function node(depth, ancestors) {
    const r = pick(10);
    if (depth > 3 || r < 4) return leaf();
    if (r < 7) {
      const a = [];
      const n = pick(6);
      for (let i = 0; i < n; i++) a.push(node(depth + 1, [...ancestors, a]));
      if (n > 0 && pick(3) === 0) getterOn(a, pick(n), ancestors);
      if (pick(6) === 0) a[n + pick(3)] = leaf();          // holes
      if (n > 1 && pick(8) === 0) delete a[pick(n)];
      if (pick(10) === 0) getterOn(a, `extra${pick(2)}`, ancestors);
      return pick(15) === 0 ? proxied(a) : a;
    }
    const o = pick(20) === 0 ? Object.create(null) : {};
    const n = pick(5);
    for (let i = 0; i < n; i++) o[pick(10) === 0 ? String(i) : `k${i}`] = node(depth + 1, [...ancestors, o]);
    if (pick(3) === 0) getterOn(o, `g${pick(3)}`, ancestors);
    if (pick(4) === 0) getterOn(o, `h${pick(3)}`, ancestors);
    return pick(15) === 0 ? proxied(o) : o;
  }
  const root = {};
  root.root = node(0, [root]);
  return { value: root, calls, errors };
}

// What encoding seed s's value with `encode` gives: the decoded value or
// the error, and the call counts.
function outcome(encode, s) {
  const { value, calls, errors } = build(s);
  let result;
  try {
    result = { value: nodeAdvancedDecode(encode(value).subarray(4)) };
  } catch (err) {
    const getter = errors.indexOf(err);
    // A getter's error must come out as that very object.
    result = getter >= 0 ? { threwFromGetter: getter } : { threw: err && err.message };
  }
  return { ...result, calls };
}

const procwireEncode = (v) => procwire.codec.advanced.encode(v);

// Runs seeds [seed, seed + count) -> { mismatches, first: [report, ...] }.
function run(count, seed, encode = procwireEncode, keep = 5) {
  let mismatches = 0;
  const first = [];
  for (let s = seed; s < seed + count; s++) {
    const mine = outcome(encode, s);
    const node = outcome(nodeAdvancedEncode, s);
    if (!util.isDeepStrictEqual(mine, node)) {
      if (++mismatches <= keep) {
        first.push(`seed ${s}:\n  procwire ${util.inspect(mine, { depth: 6 })}\n  node     ${util.inspect(node, { depth: 6 })}`);
      }
    }
  }
  return { mismatches, first };
}

module.exports = { build, outcome, run };
