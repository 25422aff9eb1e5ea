'use strict';
// The JavaScript fast path of the `advanced` codec (lib/codec/advanced-fast.js)
// against Node's own serialization (v8.DefaultSerializer with Node's host
// rules, fixtures/corpus.js): the same bytes for every shape it writes, the
// same values for every payload it reads, and a differential fuzzer (seeded,
// bounded in time: FAST_FUZZ_SECONDS, default 10) over random values and
// mutated byte streams.
//
// Values are built the ordinary way (literals, push): V8's bytes also follow
// internal representation no public API shows (an int32 in a field that once
// held a double is written as a double), which the fast path cannot see; the
// generator keeps each object key and each array to one kind of number so
// that representation equals what the value looks like. The corpus cases
// that probe representation on purpose are checked in codec.test.js.

const { describe, test } = require('node:test');
const assert = require('assert');
const v8 = require('v8');
const { spawnSync } = require('child_process');
const procwire = require('..');
const corpus = require('./fixtures/corpus');
const fast = require('../lib/codec/advanced-fast');

const T = { timeout: 120_000 };
const FUZZ_SECONDS = Number(process.env.FAST_FUZZ_SECONDS) > 0 ? Number(process.env.FAST_FUZZ_SECONDS) : 10;

function hex(buf, at = 0) {
  return Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength).subarray(Math.max(0, at - 16), at + 48).toString('hex');
}

function assertSameBytes(actual, expected, what) {
  if (Buffer.compare(actual, expected) === 0) return;
  let i = 0;
  while (i < actual.length && i < expected.length && (i < 4 || actual[i] === expected[i])) i++;
  assert.fail(`${what}: bytes differ at offset ${i} (actual ${actual.length} B, expected ${expected.length} B)\n` +
    `expected: ${hex(expected, i)}\nactual:   ${hex(actual, i)}`);
}

// Two values are the same message when Node's encoder writes the same bytes
// for them, and each shares objects the way the other does (the bytes carry
// back-references, so they say that too).
function assertSameValue(actual, expected, what) {
  assertSameBytes(corpus.meaningBytes(actual), corpus.meaningBytes(expected), what);
}

function fastBytes(value) {
  const frame = fast.encode(value);
  return frame === null ? null : Buffer.from(frame);
}

// ---- hand-made shapes -----------------------------------------------------

// Marks a shape whose payload the fast decoder leaves to ValueDeserializer.
const LONG = { decoder: 'declines' };

function shapes() {
  const shared = { s: 'shared' };
  const circular = { name: 'loop', list: [] };
  circular.self = circular;
  circular.list.push(circular, shared, shared);
  const withExtra = [1, 'two', { three: 3 }];
  withExtra.label = 'extra';
  withExtra.more = [withExtra];
  const pooled = Buffer.from('pooled bytes');
  const ab = new ArrayBuffer(64);
  const views = {
    buf: Buffer.from('hello'), pooled, u8: new Uint8Array([1, 2, 3]), i16: new Int16Array([-1, 2]),
    f64: new Float64Array([1.5, NaN]), dv: new DataView(ab, 3, 7), odd: new Uint32Array(ab, 4, 3),
    big: new BigInt64Array([-1n, 2n ** 62n]), empty: new Uint8Array(0), sameTwice: null,
  };
  views.sameTwice = [views.u8, views.u8];
  return [
    ['64 B string payload', { payload: 'x'.repeat(64) }],
    ['RPC object', { id: 12345, method: 'users.update', params: { id: 'u-1', name: 'Ann', tags: ['a', 'b'], active: true, score: 0.75 } }],
    ['array of 100 ints', Array.from({ length: 100 }, (_, i) => i * 7 - 300)],
    ['array of 100 doubles', Array.from({ length: 100 }, (_, i) => i + 0.5)],
    ['ints and doubles in one array', [1, 2.5, -0, 3, NaN, 2 ** 31, -(2 ** 31), 2 ** 31 - 1]],
    ['ints and strings in one array', [1, 'a', 2, 'b', -7]],
    ['nested 1 KiB', { a: { b: { c: { d: 'deep'.repeat(50), e: [1, 2, { f: null, g: undefined }] } } }, h: 'z'.repeat(700) }],
    // Strings of 4 KiB and more are decoded by ValueDeserializer (faster).
    ['16 KiB one-byte string', 'a'.repeat(16384), LONG],
    ['16 KiB latin1 string', '\u00e9'.repeat(16384), LONG],
    ['16 KiB two-byte string', '\u4e2d'.repeat(8192), LONG],
    ['just under 4 KiB strings', ['b'.repeat(4095), '\u4e2d'.repeat(2047)]],
    ['a long string deep inside', { a: [1, { b: ['x', 'y'.repeat(5000)] }], c: 'after' }, LONG],
    ['two-byte at odd and even offsets', ['\u4e2d', 'a', '\u4e2d', 'ab', '\u4e2d', { k: '\u4e2d', '\u4e2d': 1 }]],
    ['long ASCII key', { ['k'.repeat(300)]: 1, ['\u4e2d'.repeat(50)]: 2 }],
    ['lone surrogates and emoji', ['\ud800', 'a\udc00b', '\u{1F600}']],
    ['index keys', { 0: 'a', 1: 'b', 10: 'c', 4294967294: 'd', 4294967295: 'e', '01': 'f', '-1': 'g', 2147483648: 'h', x: 'i' }],
    ['numbers', [0, -0, 1, -1, 63, 64, -64, -65, 2 ** 30, 2 ** 31 - 1, -(2 ** 31), 2 ** 31, 2 ** 53, 1e308, 5e-324, Infinity, -Infinity, NaN]],
    ['number fields', { small: 1, neg: -123456, big: 2 ** 40, frac: 0.1, nz: -0, nan: NaN }],
    ['bigints', [0n, 1n, -1n, 2n ** 63n, 2n ** 64n - 1n, 2n ** 64n, -(2n ** 64n), 2n ** 200n + 12345n, -(3n ** 100n)]],
    ['dates', [new Date(0), new Date(1700000000000), new Date(NaN), new Date(-1)]],
    ['booleans null undefined', [true, false, null, undefined, { u: undefined }]],
    ['views', views],
    ['64 KiB Buffer', corpus.bytes(65536, 7)],
    ['repeated references', { a: shared, b: shared, c: [shared, { d: shared }] }],
    ['circular', circular],
    ['array with extra properties', withExtra],
    ['null prototype', Object.assign(Object.create(null), { a: 1, b: 'two' })],
    ['empty containers', [{}, [], '', [[]], { e: {} }]],
    ['deep nesting', (() => { let v = 'leaf'; for (let i = 0; i < 200; i++) v = { v }; return v; })()],
  ];
}

// Values the fast path leaves to ValueSerializer, which writes them.
function declined() {
  class Point { constructor() { this.x = 1; } }
  return [
    ['Map', { m: new Map([[1, 2]]) }],
    ['Set', [new Set(['a'])]],
    ['RegExp', /x/g],
    ['Error', { e: new Error('boom') }],
    ['boxed primitive', [Object(1), Object('s')]],
    ['class instance', new Point()],
    ['proxy', { p: new Proxy({ a: 1 }, {}) }],
    ['array with holes', [1, , 3]], // eslint-disable-line no-sparse-arrays
    ['a long array', Array.from({ length: 128 }, (_, i) => i)],
    ['frozen array', Object.freeze([1, 2])],
    ['ArrayBuffer', new ArrayBuffer(4)],
    // No user code runs on the fast path (issue 29): ValueSerializer runs
    // each getter once, in its order (test/codec-differential.test.js).
    ['a getter that deletes a later key', { a: 1, get b() { delete this.c; return 2; }, c: 3 }],
    ['an element getter', Object.defineProperty([1, 2], 1, { get() { return 3; }, enumerable: true })],
    ['a view whose constructor is a getter', Object.defineProperty(new Uint8Array(2), 'constructor', { get() { return Buffer; } })],
  ];
}

// ---- checks that need the key tries empty -------------------------------------

// The encoder's and the decoder's key tries live as long as the process, and
// the tests above fill them: these checks run in a child that re-runs this
// file (runFresh).
const FRESH_CHECKS = {
  longKeys() {
    const before = fast.trieNodeCounts().write;
    for (let i = 0; i < 8; i++) {
      const value = { [`${i}`.padEnd(100000, 'k')]: i, b: 2 };
      assertSameBytes(fastBytes(value), corpus.referenceEncode(value), `long key ${i}`);
    }
    assert.strictEqual(fast.trieNodeCounts().write, before);
    // A short key then a long one: the short key's node is kept, not the long one.
    const value = { shortBeforeALongKey: 1, ['x'.repeat(128)]: 2 };
    fast.encode(value);
    assert.strictEqual(fast.trieNodeCounts().write, before + 1);
  },
  endlessKeys() {
    // An object used as a dictionary meets a new key every time. Each trie
    // stops at its bound; the encoder's keys do not use up the decoder's.
    const { max } = fast.trieNodeCounts();
    const before = fast.trieNodeCounts().read;
    for (let i = 0; i < max + 500; i++) {
      const value = { [`user-${i}`]: i, [`name-${i}`]: 'x' };
      if (i % 997 === 0 || i >= max) {
        assertSameBytes(fastBytes(value), corpus.referenceEncode(value), `dictionary ${i}`);
      } else {
        fast.encode(value);
      }
    }
    assert.strictEqual(fast.trieNodeCounts().write, max);
    assert.strictEqual(fast.trieNodeCounts().read, before, 'encoding added nodes to the decoder\'s trie');
    for (let i = 0; i < max + 500; i++) {
      const value = { [`user-${i}`]: i };
      const bytes = v8.serialize(value);
      const decoded = fast.decode(bytes);
      if (i % 997 === 0 || i >= max) assertSameValue(decoded, v8.deserialize(bytes), `dictionary ${i}`);
    }
    assert.strictEqual(fast.trieNodeCounts().read, max);
    // Known and new sequences both still come out right with both tries full.
    for (const value of [{ a: 1, b: 2 }, { a: 1, b: 2 }, { fresh: 1, keys: 2 }, { fresh: 1, keys: 2 }]) {
      const bytes = fastBytes(value);
      assertSameBytes(bytes, corpus.referenceEncode(value), Object.keys(value).join(','));
      assertSameValue(fast.decode(bytes.subarray(4)), value, Object.keys(value).join(','));
    }
  },
};

if (process.argv[2] === 'fresh') {
  FRESH_CHECKS[process.argv[3]]();
  return;
}

function runFresh(name) {
  const r = spawnSync(process.execPath, [__filename, 'fresh', name],
    { encoding: 'utf8', timeout: 100_000, killSignal: 'SIGKILL' });
  assert.strictEqual(r.status, 0, `${name}, run in a fresh process: ${r.error || r.signal || ''}\n${r.stderr}`);
}

describe('fast path: bytes and values equal Node\'s', () => {
  for (const [name, value, decoder] of shapes()) {
    test(name, T, () => {
      const reference = corpus.referenceEncode(value);
      const bytes = fastBytes(value);
      assert.ok(bytes !== null, `${name}: the fast path declined it`);
      assertSameBytes(bytes, reference, name);
      // The public codec takes the fast path and hands back its own copy.
      const frame = procwire.codec.advanced.encode(value);
      assertSameBytes(frame, reference, `${name} (procwire.codec.advanced)`);
      fast.encode({ overwrite: 'the scratch buffer' });
      assertSameBytes(frame, reference, `${name} (the frame outlives the next encode)`);
      const decoded = fast.decode(reference.subarray(4));
      if (decoder === LONG) {
        assert.strictEqual(decoded, fast.NOT_FAST, `${name}: the fast decoder should leave it to ValueDeserializer`);
      } else {
        assert.notStrictEqual(decoded, fast.NOT_FAST, `${name}: the fast decoder declined Node's bytes`);
        assertSameValue(decoded, corpus.referenceDecode(reference.subarray(4)), name);
      }
      assertSameValue(procwire.codec.advanced.decode(reference.subarray(4)), corpus.referenceDecode(reference.subarray(4)),
        `${name} (procwire.codec.advanced)`);
    });
  }

  for (const [name, value] of declined()) {
    test(`declined: ${name} (ValueSerializer writes it)`, T, () => {
      assert.strictEqual(fast.encode(value), null, name);
      let reference = null;
      try { reference = corpus.referenceEncode(value); } catch { /* Node refuses it too */ }
      if (reference !== null) assertSameBytes(procwire.codec.advanced.encode(value), reference, name);
    });
  }

  test('whole corpus: the fast path writes Node\'s bytes or declines; its decoder reads Node\'s bytes or declines', T, () => {
    const cases = corpus.build().filter((c) => !c.large);
    let written = 0;
    let read = 0;
    try {
      for (const c of cases) {
        let reference;
        try { reference = corpus.referenceEncode(c.canonical ? c.canonical() : c.value); } catch { continue; }
        const bytes = fastBytes(c.value);
        if (bytes !== null) {
          assertSameBytes(bytes, reference, c.name);
          written++;
        }
        const decoded = fast.decode(reference.subarray(4));
        if (decoded !== fast.NOT_FAST) {
          corpus.assertCase(c, decoded, 'fast decoder');
          // Again: a key sequence met before is made by its object template.
          corpus.assertCase(c, fast.decode(reference.subarray(4)), 'fast decoder, second time');
          corpus.assertCase(c, fast.decode(reference.subarray(4)), 'fast decoder, third time');
          // As a channel's batch holds it, between other frames' bytes.
          const batch = Buffer.concat([Buffer.from('ff0f6f', 'hex'), reference.subarray(4), reference]);
          corpus.assertCase(c, fast.decodeRange(batch, 3, reference.length - 4), 'fast decoder, in a batch');
          // Again from the same batch: its memory is looked up once (the
          // concatenation may sit at any offset of a pooled ArrayBuffer).
          corpus.assertCase(c, fast.decodeRange(batch, 3, reference.length - 4), 'fast decoder, in a batch again');
          // A plain Uint8Array is read as it is (a small one lives on V8's
          // heap until its memory is asked for); a DataView through a Buffer.
          const plain = new Uint8Array(reference.subarray(4));
          const plainDecoded = fast.decode(plain);
          assert.notStrictEqual(plainDecoded, fast.NOT_FAST, `${c.name}: declined from a plain Uint8Array`);
          corpus.assertCase(c, plainDecoded, 'fast decoder, from a plain Uint8Array');
          const viewDecoded = fast.decode(new DataView(plain.buffer, plain.byteOffset, plain.byteLength));
          corpus.assertCase(c, viewDecoded, 'fast decoder, from a DataView');
          read++;
        }
      }
    } finally {
      corpus.cleanupAll(cases);
    }
    assert.ok(written > 80 && read > 80, `fast path wrote ${written}, read ${read}`);
  });

  test('strings of each kind, at every frame parity and at the end of the memory, are Node\'s bytes', T, () => {
    // The native string writer declines two-byte characters at an odd
    // address, and asks for more room near the end of its memory: both hand
    // over to JavaScript mid-message, which must go on from the same byte.
    const interned = `key${'k'.repeat(40)}`;
    const keyed = {};
    keyed[interned] = 1;
    const strings = ['x'.repeat(17), 'é'.repeat(40), '\u0100'.repeat(17), '中文'.repeat(64), `${'a'.repeat(30)}\u{1F600}`,
      'y'.repeat(300), '\u0101'.repeat(300), interned];
    for (const s of strings) {
      for (const value of [s, [1, s], { a: s, b: [s, 2] }]) {
        const reference = corpus.referenceEncode(value);
        for (let at = 0; at < 4; at++) {
          // Room for the whole frame, then for less and less of it: one of
          // these ends the memory inside the string's header or characters.
          for (let room = reference.length + 2; room >= 16; room -= room > 64 ? 7 : 1) {
            const buffer = Buffer.alloc(at + room);
            // Where a frame that outgrows `buffer` continues: no bytes of the
            // last frame may stand in for this one's.
            fast.scratch().fill(0xee);
            const length = fast.encodeAppend(buffer, at, value);
            assert.ok(length >= 0, 'declined');
            const frame = fast.spilled() ? fast.scratch().subarray(0, length) : buffer.subarray(at, at + length);
            assertSameBytes(frame, reference, `${JSON.stringify(value).slice(0, 40)} at ${at}, ${room} bytes of room`);
          }
        }
      }
    }
  });

  const native = require('../lib/native');
  test('the native string maker reads only the memory it is given, and nothing once it is detached',
    { ...T, skip: native.native ? false : 'the pure-JavaScript fallback has no native string maker' }, () => {
    const { binding } = native;
    const memory = new ArrayBuffer(8);
    new Uint8Array(memory).set([0x61, 0x62, 0xe9, 0x64]);
    assert.strictEqual(binding.readOneByteString(memory, 1, 3), 'b\u00e9');
    assert.strictEqual(binding.readOneByteString(memory, 8, 8), '');
    assert.strictEqual(binding.readOneByteString(memory, 2, 9), undefined);
    assert.strictEqual(binding.readOneByteString(memory, 3, 2), undefined);
    const shared = new SharedArrayBuffer(4);
    new Uint8Array(shared).set([0x77, 0x78]);
    assert.strictEqual(binding.readOneByteString(shared, 0, 2), 'wx');
    for (const notMemory of [new Uint8Array(memory), 'abc', null, {}]) {
      assert.strictEqual(binding.readOneByteString(notMemory, 0, 1), undefined);
    }
    structuredClone(memory, { transfer: [memory] });
    assert.strictEqual(binding.readOneByteString(memory, 0, 1), undefined);
  });

  test('payloads in shared memory, and batches read one after another, decode to Node\'s values', T, () => {
    const value = { payload: 'x'.repeat(40), key: 'short', wide: '\u00e9'.repeat(30) };
    const frame = corpus.referenceEncode(value);
    const shared = new Uint8Array(new SharedArrayBuffer(frame.length));
    shared.set(frame);
    assert.deepStrictEqual(fast.decode(shared.subarray(4)), value);
    assert.deepStrictEqual(procwire.codec.advanced.decode(shared.subarray(4)), value);
    const batch = Buffer.concat([Buffer.alloc(5), frame.subarray(4)]);
    const other = Buffer.concat([Buffer.alloc(9), frame.subarray(4)]);
    for (const [bytes, at] of [[batch, 5], [other, 9], [batch, 5], [shared, 4]]) {
      assert.deepStrictEqual(fast.decodeRange(bytes, at, frame.length - 4), value);
    }
  });

  test('aligned views borrow the payload memory; unaligned ones and copyViews copy', T, () => {
    const frame = corpus.referenceEncode({ a: new Float64Array([1, 2]), b: Buffer.from('xyz') });
    const payload = Buffer.alloc(frame.length + 8);
    // Place the payload so the Float64Array's bytes land 8-aligned.
    let shift = 0;
    for (; shift < 8; shift++) {
      frame.copy(payload, shift, 4);
      const d = fast.decode(payload.subarray(shift, shift + frame.length - 4));
      if (d.a.buffer === payload.buffer) break;
    }
    assert.ok(shift < 8, 'no placement made the Float64Array borrow the payload');
    const borrowed = fast.decode(payload.subarray(shift, shift + frame.length - 4));
    assert.strictEqual(borrowed.b.buffer, payload.buffer);
    const copied = fast.decode(payload.subarray(shift, shift + frame.length - 4), true);
    assert.notStrictEqual(copied.a.buffer, payload.buffer);
    assert.notStrictEqual(copied.b.buffer, payload.buffer);
    assert.deepStrictEqual(copied, borrowed);
    const odd = fast.decode(payload.subarray(shift + 1, shift + 1 + frame.length - 4));
    assert.strictEqual(odd, fast.NOT_FAST, 'a shifted payload no longer starts with the header');
  });

  test('hostile keys: __proto__ and Object.prototype setters are left to ValueDeserializer', T, () => {
    const payload = Buffer.from('ff0f6f22095f5f70726f746f5f5f6f7b007b01', 'hex');
    assert.strictEqual(fast.decode(payload), fast.NOT_FAST);
    const value = procwire.codec.advanced.decode(payload);
    assert.ok(Object.hasOwn(value, '__proto__'));
    assert.strictEqual(Object.getPrototypeOf(value), Object.prototype);
    const dup = Buffer.from('ff0f6f22016149022201614904 7b02'.replace(/ /g, ''), 'hex');
    assert.strictEqual(fast.decode(dup), fast.NOT_FAST);
    assert.throws(() => procwire.codec.advanced.decode(dup), { code: 'ERR_PROCWIRE_DECODE' });
  });

  test('messages that repeat a key sequence and then leave it are written as Node writes them', T, () => {
    // The encoder copies a key's bytes when it is the key that followed the
    // same keys last time; every way of leaving that guess is here, each
    // message met twice and then after the others.
    const many = {};
    for (let i = 0; i < 40; i++) many[`key${i}`] = i;
    const ownProto = {};
    Object.defineProperty(ownProto, '__proto__', { value: 1, enumerable: true, configurable: true, writable: true });
    const sequence = [
      { a: 1, b: 2 }, { a: 1, c: 2 }, { a: 1, b: 2, c: 3 }, { a: 1 }, { ab: 1, b: 2 }, { b: 1, a: 2 },
      { a: { a: { a: 1 } }, b: 2 }, { a: 1, 7: 'seven' }, { 7: 'seven', a: 1 }, { a: 1, '07': 'not an index' },
      { a: 1, 4294967295: 'not an index either' }, { ['k'.repeat(127)]: 1, b: 2 }, { ['k'.repeat(128)]: 1, b: 2 },
      { ['m'.repeat(40)]: 1 }, { a: 1, '\u4e2d': 2 }, { a: 1, caf\u00e9: 2 }, { a: 1, '': 2 }, ownProto, many,
      Object.assign(Object.create(null), { a: 1, b: 2 }),
    ];
    const check = (value, what) => {
      const bytes = fastBytes(value);
      assert.ok(bytes !== null, `${what}: declined`);
      assertSameBytes(bytes, corpus.referenceEncode(value), what);
    };
    for (const value of sequence) {
      check(value, `${Object.keys(value).join(',')} (first)`);
      check(value, `${Object.keys(value).join(',')} (again)`);
    }
    for (const value of sequence) check(value, `${Object.keys(value).join(',')} (after the others)`);
  });

  test('a getter that gives Object.prototype an enumerable key does not add it to later objects', T, () => {
    const value = {
      get first() {
        Object.defineProperty(Object.prototype, 'inherited', { value: 1, enumerable: true, configurable: true });
        return 1;
      },
      later: { own: 2 },
    };
    const expected = corpus.referenceEncode(value);
    delete Object.prototype.inherited;
    try {
      assertSameBytes(procwire.codec.advanced.encode(value), expected, 'procwire.codec.advanced');
      delete Object.prototype.inherited;
      assert.strictEqual(fast.encode(value), null, 'the fast path should leave it to ValueSerializer');
    } finally {
      delete Object.prototype.inherited;
    }
    // With one object the fast path declines too (it runs no getter), and
    // the bytes are still Node's.
    const alone = {
      get first() {
        Object.defineProperty(Object.prototype, 'inherited', { value: 1, enumerable: true, configurable: true });
        return 1;
      },
      own: 2,
    };
    try {
      assert.strictEqual(fast.encode(alone), null, 'the fast path should leave a getter to ValueSerializer');
      const bytes = procwire.codec.advanced.encode(alone);
      delete Object.prototype.inherited;
      const reference = corpus.referenceEncode(alone);
      assertSameBytes(bytes, reference, 'a single object');
    } finally {
      delete Object.prototype.inherited;
    }
  });

  test('messages that repeat a key sequence and then leave it decode as ValueDeserializer does', T, () => {
    // The decoder first compares each key with the one that followed the
    // same keys last time; every way of leaving that guess is here.
    const long = 'k'.repeat(200);
    const sequence = [
      { a: 1, b: 2 }, { a: 1, b: 2 }, { a: 1, b: 2 },
      { a: 1, c: 2 }, { a: 1, b: 2, c: 3 }, { a: 1 }, { ab: 1, b: 2 }, { b: 1, a: 2 },
      { a: { a: { a: 1 } }, b: 2 }, { a: 1, 7: 'seven' }, { 7: 'seven', a: 1 },
      { [long]: 1, b: 2 }, { [long]: 1, b: 2 }, { [`${long}x`]: 1, b: 2 },
      { a: 1, '\u4e2d': 2 }, { a: 1, '\u4e2d': 2 }, { a: 1, b: 2 },
      Object.assign(Object.create(null), { a: 1, b: 2 }),
    ];
    for (const value of sequence) {
      const bytes = v8.serialize(value);
      const decoded = fast.decode(bytes);
      assert.notStrictEqual(decoded, fast.NOT_FAST, JSON.stringify(value));
      assertSameValue(decoded, v8.deserialize(bytes), JSON.stringify(value));
      assert.deepStrictEqual(Object.keys(decoded), Object.keys(value));
    }
    // The guessed key met twice in one object (bytes V8 never writes) is
    // still refused, after the decoder has learnt { a, b }.
    const twice = Buffer.from('ff0f6f220161490222016149047b02', 'hex');
    assert.strictEqual(fast.decode(twice), fast.NOT_FAST);
    assert.throws(() => procwire.codec.advanced.decode(twice), { code: 'ERR_PROCWIRE_DECODE' });
    // A key cut short by the payload's end is not a match.
    const cut = Buffer.from('ff0f6f220261', 'hex');
    assert.strictEqual(fast.decode(cut), fast.NOT_FAST);
  });
});

// ---- differential fuzzer ---------------------------------------------------

function makeRandom(seed) {
  let s = seed >>> 0;
  const next = () => {
    // xorshift32: fixed seed, same sequence on every Node line.
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s;
  };
  return {
    int: (n) => (next() % n) | 0,
    pick: (list) => list[next() % list.length],
    chance: (p) => next() / 4294967296 < p,
    u32: next,
  };
}

const SPECIAL_DOUBLES = [-0, NaN, Infinity, -Infinity, 2 ** 31, -(2 ** 31) - 1, 2 ** 53 + 2, 1e-300, 0.1, -2.5];
const CODE_RANGES = [[0x20, 0x7e], [0, 0xff], [0x100, 0xffff], [0xd800, 0xdfff], [0x4e00, 0x4e10]];

function randomString(r) {
  const len = r.pick([0, 1, 2, 3, 7, 8, 24, 25, 40, 41, 100, 300]);
  const [lo, hi] = r.pick(CODE_RANGES);
  const wide = r.chance(0.3);
  const codes = [];
  for (let i = 0; i < len; i++) {
    const [a, b] = wide && r.chance(0.2) ? [lo, hi] : [0x61, 0x7a];
    codes.push(a + r.int(b - a + 1));
  }
  return String.fromCharCode(...codes);
}

function randomInt(r) {
  switch (r.int(4)) {
    case 0: return r.int(128) - 64;
    case 1: return (r.u32() | 0);
    case 2: return r.int(100000);
    default: return -r.int(2 ** 31 - 1) - 1;
  }
}

function randomDouble(r) {
  if (r.chance(0.3)) return r.pick(SPECIAL_DOUBLES);
  // Never integral: V8 would write a computed 47.0 as a double.
  return ((r.u32() >>> 8) + 0.5) * (r.chance(0.5) ? 1 : -1) / 4;
}

const VIEW_CTORS = [Uint8Array, Int8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array,
  Float32Array, Float64Array, BigInt64Array, BigUint64Array, DataView, Buffer];

function randomView(r) {
  const Ctor = r.pick(VIEW_CTORS);
  if (Ctor === Buffer) return r.chance(0.5) ? Buffer.from(randomString(r), 'latin1') : corpus.bytes(r.int(40), r.u32());
  const size = Ctor === DataView ? 1 : Ctor.BYTES_PER_ELEMENT;
  const ab = new ArrayBuffer(size * 24);
  new Uint8Array(ab).set(corpus.bytes(size * 24, r.u32()));
  const start = r.int(4);
  const count = r.int(12);
  return Ctor === DataView ? new DataView(ab, start, count) : new Ctor(ab, start * size, count);
}

// A random value. `seen` collects objects for back-references; `mayDecline`
// allows shapes the fast path leaves to ValueSerializer.
function randomValue(r, depth, seen, mayDecline) {
  const kinds = depth > 3 ? 8 : 13;
  switch (r.int(kinds)) {
    case 0: return randomString(r);
    case 1: return randomInt(r);
    case 2: return randomDouble(r);
    case 3: return r.pick([true, false, null, undefined]);
    case 4: {
      const big = BigInt(r.u32()) ** BigInt(1 + r.int(5));
      return r.chance(0.5) ? -big : big;
    }
    case 5: return new Date(r.chance(0.1) ? NaN : r.u32() * 1000);
    case 6: return randomView(r);
    case 7: return seen.length > 0 ? r.pick(seen) : 'none yet';
    case 8: case 9: return randomObject(r, depth, seen, mayDecline);
    case 10: case 11: return randomArray(r, depth, seen, mayDecline);
    default: {
      if (!mayDecline) return randomObject(r, depth, seen, mayDecline);
      return r.pick([() => new Map([[1, 'a']]), () => new Set([2]), () => /re/, () => Object(5), () => [1, , 2]])(); // eslint-disable-line no-sparse-arrays
    }
  }
}

// A slice of a two-byte string stays two-byte inside V8 even when all its
// characters fit in one (and V8 writes it so): a fresh copy is one-byte.
function oneCopy(s) {
  const codes = [];
  for (let i = 0; i < s.length; i++) codes.push(s.charCodeAt(i));
  return String.fromCharCode(...codes);
}

// Object keys name the kind of value they hold (i*: int, d*: double, ...),
// so a field never holds an int after a double (see the file comment).
function randomObject(r, depth, seen, mayDecline) {
  const o = r.chance(0.1) ? Object.create(null) : {};
  seen.push(o);
  const n = r.int(6);
  for (let i = 0; i < n; i++) {
    switch (r.int(6)) {
      case 0: o[`i${r.int(4)}`] = randomInt(r); break;
      case 1: o[`d${r.int(4)}`] = randomDouble(r); break;
      case 2: o[String(r.pick([0, 1, 7, 100, 2 ** 31, 4294967294, 4294967295]))] = randomString(r); break;
      case 3: o[`s${oneCopy(randomString(r).slice(0, 6))}`] = randomString(r); break;
      case 4: o[`\u4e2d${r.int(3)}`] = r.chance(0.5); break;
      default: o[`o${r.int(4)}`] = randomNonNumber(r, depth + 1, seen, mayDecline);
    }
  }
  if (r.chance(0.05)) o.self = o;
  return o;
}

function randomNonNumber(r, depth, seen, mayDecline) {
  for (;;) {
    const v = randomValue(r, depth, seen, mayDecline);
    if (typeof v !== 'number') return v;
  }
}

// An array holds ints or doubles, never both, unless it holds numbers only
// (V8 then stores all of them as doubles, as the fast path writes them).
// V8 starts an array made at a literal site in the elements kind earlier
// arrays of that site ended in: one site per flavor keeps that kind the
// flavor's own, and an array of mixed numbers always has a double in it.
const NEW_ARRAY = [() => [], () => [], () => [], () => []];

function randomArray(r, depth, seen, mayDecline) {
  const flavor = r.int(4);
  const a = NEW_ARRAY[flavor]();
  seen.push(a);
  const n = r.int(8);
  if (flavor === 1) a.push(randomDouble(r));
  for (let i = 0; i < n; i++) {
    if (flavor === 0) a.push(randomInt(r));
    else if (flavor === 1) a.push(r.chance(0.5) ? randomInt(r) : randomDouble(r));
    else if (flavor === 2) a.push(r.chance(0.5) ? randomInt(r) : randomNonNumber(r, depth + 1, seen, mayDecline));
    else a.push(r.chance(0.5) ? randomDouble(r) : randomNonNumber(r, depth + 1, seen, mayDecline));
  }
  if (flavor >= 2 && r.chance(0.1)) a[`x${r.int(3)}`] = randomString(r);
  return a;
}

function referenceOutcome(fn) {
  try {
    return { value: fn() };
  } catch (err) {
    return { err };
  }
}

describe('fast path: differential fuzzer', () => {
  test(`random values: same bytes as Node's, or declined (${FUZZ_SECONDS} s)`, T, () => {
    const r = makeRandom(0x5eed1234);
    const deadline = Date.now() + FUZZ_SECONDS * 500;
    let compared = 0;
    let declines = 0;
    let exact = 0;
    let representation = 0;
    for (let i = 0; Date.now() < deadline || i < 200; i++) {
      const mayDecline = r.chance(0.2);
      const value = randomValue(r, 0, [], mayDecline);
      const reference = referenceOutcome(() => corpus.referenceEncode(value));
      const bytes = fastBytes(value);
      if (bytes === null) {
        assert.ok(mayDecline || reference.err, `case ${i}: declined a value it writes: ${require('util').inspect(value, { depth: 4 })}`);
        declines++;
        continue;
      }
      assert.ok(!reference.err, `case ${i}: wrote a value Node refuses (${reference.err && reference.err.message})`);
      if (Buffer.compare(bytes, reference.value) === 0) {
        exact++;
      } else {
        // V8 followed a representation the value does not show (see the
        // file comment; Node 26's allocation sites make some arrays built
        // here holey): Node's reading of its bytes, written canonically,
        // must be the fast path's bytes.
        assertSameBytes(bytes, corpus.meaningBytes(corpus.referenceDecode(reference.value.subarray(4))), `case ${i}`);
        representation++;
      }
      const decoded = fast.decode(bytes.subarray(4));
      assert.notStrictEqual(decoded, fast.NOT_FAST, `case ${i}: the fast decoder declined its own bytes`);
      assertSameValue(decoded, corpus.referenceDecode(bytes.subarray(4)), `case ${i} decoded`);
      compared++;
    }
    assert.ok(compared > 100, `only ${compared} values compared (${declines} declined)`);
    assert.ok(representation * 10 <= compared,
      `${representation} of ${compared} differ only in representation (${exact} byte-identical)`);
  });

  test(`mutated payloads: the fast decoder agrees with ValueDeserializer or declines (${FUZZ_SECONDS} s)`, T, () => {
    const r = makeRandom(0xdec0de);
    const seeds = [];
    for (let i = 0; i < 200; i++) {
      const v = randomValue(r, 0, [], false);
      const bytes = fastBytes(v);
      if (bytes !== null) seeds.push(bytes.subarray(4));
    }
    for (const c of corpus.build().filter((x) => !x.large && !x.cleanup)) {
      try { seeds.push(corpus.referenceEncode(c.value).subarray(4)); } catch { /* not encodable */ }
    }
    const deadline = Date.now() + FUZZ_SECONDS * 500;
    let accepted = 0;
    let rejected = 0;
    for (let i = 0; Date.now() < deadline || i < 2000; i++) {
      const input = Buffer.from(r.pick(seeds));
      const edits = 1 + r.int(3);
      for (let e = 0; e < edits; e++) {
        const at = 2 + r.int(Math.max(1, input.length - 2));
        if (at < input.length) input[at] = r.chance(0.5) ? r.int(256) : r.pick([0, 0x7f, 0x80, 0xff, 0x22, 0x5e, 0x6f, 0x41, 0x2d, 0x5c]);
      }
      const cut = r.chance(0.2) ? input.subarray(0, r.int(input.length + 1)) : input;
      const mine = fast.decode(cut);
      // The same payload amid other bytes, as a channel's batch holds it:
      // decodeRange must read nothing outside its range (the next frame's
      // bytes could otherwise complete a cut payload).
      const before = r.int(9);
      const padded = Buffer.concat([Buffer.alloc(before, 0x6f), cut, r.pick(seeds)]);
      const ranged = fast.decodeRange(padded, before, cut.length);
      if (mine === fast.NOT_FAST) {
        assert.strictEqual(ranged, fast.NOT_FAST, `${cut.toString('hex')}: decodeRange read past its range`);
        continue;
      }
      assertSameValue(ranged, mine, `${cut.toString('hex')} (decodeRange)`);
      const theirs = referenceOutcome(() => v8.deserialize(cut));
      const node = referenceOutcome(() => corpus.referenceDecode(cut));
      assert.ok(!node.err, `${cut.toString('hex')}: fast decoder accepted what Node rejects (${node.err && node.err.message})`);
      assertSameValue(mine, node.value, cut.toString('hex'));
      if (!theirs.err) accepted++;
      else rejected++;
    }
    assert.ok(accepted > 100, `only ${accepted} mutated payloads decoded (${rejected})`);
  });
});

// What a channel writes on the wire. Its send() encodes with the fast path
// (and ValueSerializer for what that declines), so the bytes a plain Node
// child reads must be the codec's. The child here is /bin/sh copying the
// channel's socket (fd 3) into a file until the parent disconnects.
describe('fast path on a channel: the bytes on the wire', () => {
  const fs = require('fs');
  const os = require('os');
  const path = require('path');
  test('procwire.fork (advanced, plain child): every corpus message is the codec\'s frame', T, async (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-wire-'));
    const file = path.join(dir, 'wire.bin');
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const cases = corpus.build().filter((c) => c.send && !c.large);
    assert.ok(cases.length > 80, `only ${cases.length} cases`);
    const expected = [];
    const child = procwire.fork(file, [], {
      execPath: '/bin/sh', execArgv: ['-c', 'exec cat <&3 >"$0"'], serialization: 'advanced', child: 'node',
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    try {
      for (const c of cases) {
        // The fast path writes the canonical form of a value whose bytes
        // follow V8's internal representation (see corpus.js); what it
        // declines, ValueSerializer writes as Node does.
        const viaFast = fastBytes(c.value) !== null;
        expected.push(corpus.referenceEncode(viaFast && c.canonical ? c.canonical() : c.value));
        child.send(c.value);
      }
      child.disconnect();
      const { code, signal } = await exited;
      assert.strictEqual(signal, null);
      assert.strictEqual(code, 0);
      const wire = fs.readFileSync(file);
      let at = 0;
      cases.forEach((c, i) => {
        assertSameBytes(wire.subarray(at, at + expected[i].length), expected[i], c.name);
        at += expected[i].length;
      });
      assert.strictEqual(at, wire.length);
    } finally {
      clearTimeout(timer);
      corpus.cleanupAll(cases);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
});

describe('fast path: memory', () => {
  test('keys the encoder cannot copy (over 127 characters) are not kept in its trie', T, () => {
    runFresh('longKeys');
  });

  test('endless new keys fill each key trie to its bound, and Node\'s bytes are still written and read', T, () => {
    runFresh('endlessKeys');
  });


  test('a scratch buffer the encoder outgrew is not kept alive', T, async () => {
    // V8's collector, reached through its --expose-gc flag set at run time.
    require('v8').setFlagsFromString('--expose-gc');
    const gc = require('vm').runInNewContext('gc');
    // Strings long enough for the native writer, so it has looked the
    // scratch buffer's memory up before the next message outgrows it.
    assert.ok(fast.encodeToScratch({ s: 'x'.repeat(100) }) > 0);
    const before = new WeakRef(fast.scratch());
    const firstLength = fast.scratch().length;
    // Outgrown by a Buffer: no string is written after it, which would have
    // looked the new memory up.
    assert.ok(fast.encodeToScratch({ s: 'x'.repeat(100), big: Buffer.alloc(4 * 1024 * 1024) }) > 0);
    const grew = fast.scratch().length > firstLength;
    // A WeakRef keeps its target until the current job ends: collect after it.
    let collected = false;
    for (let i = 0; i < 5 && !collected; i++) {
      await new Promise(setImmediate);
      gc();
      collected = before.deref() === undefined;
    }
    assert.ok(grew, 'the message should have outgrown the scratch buffer');
    assert.ok(collected, 'the outgrown scratch buffer is still referenced');
    // Back to a small scratch buffer for the tests after this one.
    fast.encode({ overwrite: 'the scratch buffer' });
  });
});
