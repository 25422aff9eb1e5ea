'use strict';
// Arrays marked with separateElements (lib/codec/separate.js): the advanced
// format's JavaScript encoder writes each group of elements with no
// back-reference to another group, byte for byte what it writes for the
// same array of copies (an unmarked array, whose bytes the codec tests hold
// to Node's IPC serializer's), and the codec reads that back as copies; a channel refuses a
// marked message that only V8's serializer could write, queueing nothing,
// and goes on.

const test = require('node:test');
const assert = require('node:assert');
const { once } = require('events');
const v8 = require('v8');
const { advanced } = require('..').codec;
const fast = require('../lib/codec/advanced-fast');
const { separateElements } = require('../lib/codec/separate');
const { namedPair } = require('./helpers/pair');
const { withTimeout } = require('./helpers/wait');
const { prng } = require('./helpers/prng');

function hexOf(bytes) {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}

// A copy of `value` that keeps what is shared inside it (`seen`: original ->
// copy). Arrays are built packed, as the originals are: a deserialized array
// is holey, and V8 writes that differently.
function copyOf(value, seen) {
  if (value === null || typeof value !== 'object') return value;
  if (seen.has(value)) return seen.get(value);
  let copy;
  if (Buffer.isBuffer(value)) copy = Buffer.from(value);
  else if (value instanceof Date) copy = new Date(value.getTime());
  else if (Array.isArray(value)) {
    copy = [];
    seen.set(value, copy);
    for (const v of value) copy.push(copyOf(v, seen));
    return copy;
  } else {
    copy = {};
    seen.set(value, copy);
    for (const k of Object.keys(value)) copy[k] = copyOf(value[k], seen);
    return copy;
  }
  seen.set(value, copy);
  return copy;
}

// [tag, ...group0, ...group1, ...], each group copied on its own, as V8
// would write separate values.
function copiesOf(tag, groups) {
  const out = [tag];
  for (const g of groups) {
    const seen = new Map();
    for (const v of g) out.push(copyOf(v, seen));
  }
  return out;
}

function marked(tag, groups) {
  const stride = groups[0].length;
  const out = separateElements([tag], stride);
  for (const g of groups) out.push(...g);
  return out;
}

const shared = { n: 1, s: 'text' };
const date = new Date(0);
const buf = Buffer.from('shared bytes');
// More objects than the encoder finds by a linear scan, so later groups
// meet earlier ones through its Map.
const many = Array.from({ length: 40 }, (_, i) => ({ i }));

const CASES = [
  ['one object in every group', 2, () => [[1, shared], [2, shared], [3, shared]]],
  ['a shared part', 3, () => [[1, { a: shared }, null], [2, [shared, 'x'], 'name'], [3, { b: { c: shared } }, null]]],
  ['shared inside a group stays shared', 2, () => [[1, { x: shared, y: shared }], [2, [shared, shared]]]],
  ['a cycle inside a group', 2, () => {
    const a = { name: 'a' };
    a.self = a;
    return [[1, a], [2, a]];
  }],
  ['the same Buffer, Date and array', 2, () => [[1, [buf, date]], [2, { buf, date }], [3, buf]]],
  ['past the linear ids', 2, () => [[1, many], [2, many], [3, { again: many[39], first: many[0] }]]],
  ['past the linear ids within a later group', 2, () => [[1, many], [2, { list: many, last: many[39], first: many[0] }]]],
  ['primitives and strings only', 2, () => [[1, 'same'], [2, 'same'], [3, -1.5]]],
];

for (const [name, , build] of CASES) {
  test(`separate groups: ${name}`, () => {
    const groups = build();
    const frame = fast.encode(marked(0, groups));
    assert.notStrictEqual(frame, null, 'the fast path declined it');
    const copies = copiesOf(0, groups);
    assert.strictEqual(hexOf(frame), hexOf(fast.encode(copies)));
    const decoded = advanced.decode(frame.subarray(4));
    assert.deepStrictEqual(decoded, copies);
    // Read back, no object is met in two groups.
    const stride = groups[0].length;
    const owner = new Map();
    const visit = (v, group) => {
      if (v === null || typeof v !== 'object') return;
      if (owner.has(v)) {
        assert.strictEqual(owner.get(v), group, 'an object shared between groups');
        return;
      }
      owner.set(v, group);
      for (const k of Object.keys(v)) visit(v[k], group);
    };
    for (let i = 1; i < decoded.length; i++) visit(decoded[i], Math.floor((i - 1) / stride));
  });
}

test('an unmarked array keeps its back-references, and the next message is unmarked', () => {
  const withRefs = [1, shared, 2, shared];
  const separate = hexOf(fast.encode(marked(0, [[1, shared], [2, shared]])));
  assert.notStrictEqual(separate, hexOf(fast.encode(withRefs)));
  assert.strictEqual(hexOf(fast.encode(withRefs).subarray(4)), hexOf(v8.serialize(withRefs)));
  // A marked array inside an unmarked message is an ordinary array.
  const inner = marked(0, [[1, shared], [2, shared]]);
  assert.strictEqual(hexOf(fast.encode({ inner }).subarray(4)), hexOf(v8.serialize({ inner })));
});

// The encoder takes a marked array's elements without asking V8 about each
// (it is lib's own array), but a hole is still found: push leaves one where
// a setter on the prototype chain took the element.
test('a marked array with a hole is declined', () => {
  Object.defineProperty(Object.prototype, '2', { set() {}, configurable: true });
  let message;
  try {
    message = separateElements([0], 2);
    message.push(1, 'a', 2, 'b');
  } finally {
    delete Object.prototype[2];
  }
  assert.ok(!Object.hasOwn(message, 2));
  assert.strictEqual(fast.encode(message), null);
});

test('a channel refuses a marked message only V8 could write, queues nothing, and goes on', async (t) => {
  const pair = await namedPair();
  t.after(() => pair.close());
  const got = [];
  pair.serverSide.on('message', (m) => got.push(m));
  const map = new Map([['k', shared]]);
  assert.throws(() => pair.client.send(marked(0, [[1, map], [2, map]])), { code: 'ERR_PROCWIRE_UNSERIALIZABLE' });
  // Unmarked, V8's serializer writes it, with its back-reference.
  pair.client.send([0, 1, map, 2, map]);
  pair.client.send(marked(0, [[1, shared], [2, shared]]));
  await withTimeout(new Promise((resolve) => {
    const check = () => (got.length === 2 ? resolve() : once(pair.serverSide, 'message').then(check));
    check();
  }), 10_000, 'two messages');
  assert.strictEqual(got[0][2], got[0][4]);
  assert.notStrictEqual(got[1][2], got[1][4]);
  assert.deepStrictEqual(got[1], [0, 1, { n: 1, s: 'text' }, 2, { n: 1, s: 'text' }]);
});

test('the mark is read without user code: a revoked proxy keeps its coded error, a proxy prototype is not asked', () => {
  const { codec } = require('..');
  const { proxy, revoke } = Proxy.revocable([], {});
  revoke();
  assert.throws(() => codec.advanced.encode(proxy), { code: 'ERR_PROCWIRE_UNSERIALIZABLE' });
  const asked = [];
  const array = [1, 2];
  Object.setPrototypeOf(array, new Proxy(Array.prototype, { get(target, key, receiver) {
    asked.push(key);
    return Reflect.get(target, key, receiver);
  } }));
  // V8's serializer writes it (its prototype is not looked at).
  assert.ok(codec.advanced.encode(array).length > 4);
  assert.ok(!asked.some((k) => typeof k === 'symbol' && String(k).includes('separate')), asked.map(String).join());
});

// Groups of random values for seed `s` whose objects are shared at random:
// inside a group, across groups, and in cycles (a value that takes an
// object made earlier, which may be one of its own ancestors).
function randomGroups(s) {
  const rand = prng(s);
  const pick = (n) => Math.floor(rand() * n);
  const made = [];
  const leaf = () => {
    switch (pick(9)) {
      case 0: return pick(1000);
      case 1: return rand() * 1e6;
      case 2: return `s${pick(30)}`;
      case 3: return pick(2) === 0;
      case 4: return null;
      case 5: return undefined;
      case 6: return new Date(pick(1e9));
      case 7: return BigInt(pick(1e9)) * (pick(2) === 0 ? 1n : -1n);
      default: return Buffer.from([pick(256), 2, 3]);
    }
  };
  const node = (depth) => {
    if (made.length > 0 && pick(5) === 0) return made[pick(made.length)];
    const r = pick(10);
    if (depth > 3 || r < 4) return leaf();
    if (r < 7) {
      const a = [];
      made.push(a);
      for (let n = pick(5); n > 0; n--) a.push(node(depth + 1));
      return a;
    }
    const o = {};
    made.push(o);
    for (let n = pick(4); n > 0; n--) o[`k${pick(6)}`] = node(depth + 1);
    return o;
  };
  const stride = 1 + pick(3);
  const groups = [];
  for (let g = 1 + pick(6); g > 0; g--) {
    const group = [];
    for (let i = 0; i < stride; i++) group.push(node(0));
    groups.push(group);
  }
  return groups;
}

// The objects of `value` in the order a walk meets them, each named by when
// it was first met: two values with the same layout share (and cycle)
// alike. Numbers are compared by value: whether V8 writes one as an integer
// or a double depends on how its array was stored, which JavaScript cannot
// see.
function layoutOf(value, seen = new Map(), out = []) {
  if (value === null || typeof value !== 'object') {
    out.push(typeof value === 'bigint' ? `${value}n` : value);
    return out;
  }
  if (seen.has(value)) {
    out.push(`ref ${seen.get(value)}`);
    return out;
  }
  seen.set(value, seen.size);
  out.push(Object.prototype.toString.call(value));
  if (value instanceof Date) out.push(value.getTime());
  else if (ArrayBuffer.isView(value)) out.push(Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('hex'));
  else {
    if (Array.isArray(value)) out.push(`length ${value.length}`);
    for (const k of Object.keys(value)) {
      out.push(k);
      layoutOf(value[k], seen, out);
    }
  }
  out.push('end');
  return out;
}

test('random groups with shared objects and cycles (seeded): Node reads back copies, sharing inside a group only', () => {
  const { nodeAdvancedDecode } = require('../bench/lib/node-codec');
  const SEED = 31;
  const COUNT = 5000;
  let mismatches = 0;
  let first = null;
  for (let s = SEED; s < SEED + COUNT; s++) {
    const groups = randomGroups(s);
    const frame = fast.encode(marked(0, groups));
    const copies = copiesOf(0, groups);
    let why = null;
    if (frame === null) why = 'declined';
    else {
      const got = JSON.stringify(layoutOf(nodeAdvancedDecode(frame.subarray(4))));
      const want = JSON.stringify(layoutOf(copies));
      if (got !== want) why = `Node read ${got}\n  want ${want}`;
      else if (hexOf(frame) !== hexOf(fast.encode(copies))) why = 'not the bytes of the copies';
    }
    if (why !== null && mismatches++ === 0) first = `seed ${s}: ${why}`;
  }
  assert.strictEqual(mismatches, 0, `${mismatches} of ${COUNT} differ; the first:\n${first}`);
});
