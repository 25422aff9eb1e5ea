'use strict';
// procwire.codec against Node's own child_process serialization, rebuilt on
// require('v8') (see fixtures/corpus.js): byte equality, decode both ways,
// memory borrowing, and rejection of hostile payloads with coded errors.

const { describe, test } = require('node:test');
const assert = require('assert');
const { StringDecoder } = require('string_decoder');
const procwire = require('..');
const corpus = require('./fixtures/corpus');

const { advanced, json } = procwire.codec;
const T = { timeout: 60000 };

function hex(buf, max = 256) {
  const h = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength).toString('hex');
  return h.length > max * 2 ? `${h.slice(0, max * 2)}... (${buf.byteLength} bytes)` : h;
}

// The first differing byte, for readable failure messages.
function assertSameBytes(actual, expected, what) {
  if (Buffer.compare(actual, expected) === 0) return;
  let i = 0;
  while (i < actual.length && i < expected.length && actual[i] === expected[i]) i++;
  assert.fail(`${what}: bytes differ at offset ${i} (actual ${actual.length} B, expected ${expected.length} B)\n` +
    `expected: ${hex(expected.subarray(Math.max(0, i - 16), i + 48))}\n` +
    `actual:   ${hex(actual.subarray(Math.max(0, i - 16), i + 48))}`);
}

function assertCoded(fn, code, what) {
  try {
    fn();
  } catch (err) {
    if (code instanceof RegExp) assert.match(String(err && err.code), code, `${what}: ${err && err.stack}`);
    else assert.strictEqual(err && err.code, code, `${what}: got ${err && err.stack}`);
    return err;
  }
  assert.fail(`${what}: did not throw`);
}

// Two decoded values mean the same when their meaning bytes (corpus.js) are
// equal (robust against Invalid Date, holes, NaN, cycles, representation).
function assertSameMeaning(actual, expected, what) {
  assertSameBytes(corpus.meaningBytes(actual), corpus.meaningBytes(expected), what);
}

// Copies payload into a fresh ArrayBuffer at byte offset `at`.
function placeAt(payload, at, extra = 16) {
  const ab = new ArrayBuffer(at + payload.length + extra);
  const u = new Uint8Array(ab, at, payload.length);
  u.set(payload);
  return u;
}

function payloadOf(frame) {
  return frame.subarray(4);
}

describe('advanced: bytes equal Node\'s serializer', () => {
  const cases = corpus.build();
  for (const c of cases) {
    test(`encode ${c.name}`, T, () => {
      const expected = corpus.referenceEncode(c.canonical ? c.canonical() : c.value);
      const actual = advanced.encode(c.value);
      assert.ok(Buffer.isBuffer(actual));
      assertSameBytes(actual, expected, c.name);
      assert.strictEqual(actual.readUInt32BE(0), actual.length - 4);
    });
  }
  test('cleanup ports', () => corpus.cleanupAll(cases));
});

describe('advanced: decode both ways', () => {
  const cases = corpus.build();
  for (const c of cases) {
    test(`procwire decodes Node's bytes: ${c.name}`, T, () => {
      const frame = corpus.referenceEncode(c.value);
      corpus.assertCase(c, advanced.decode(payloadOf(frame)));
      // from a fresh, exactly sized buffer too
      corpus.assertCase(c, advanced.decode(Buffer.from(payloadOf(frame))), 'copy');
    });
    test(`Node decodes procwire's bytes: ${c.name}`, T, () => {
      const frame = advanced.encode(c.value);
      corpus.assertCase(c, corpus.referenceDecode(payloadOf(frame)));
    });
  }
  test('cleanup ports', () => corpus.cleanupAll(cases));

  test('Buffers come back as Buffers, Uint8Arrays as Uint8Arrays', T, () => {
    const value = {
      buf: Buffer.from('buf'), u8: new Uint8Array([1, 2]), u8c: new Uint8ClampedArray([3]),
      i8: new Int8Array([-1]),
    };
    for (const [label, bytes] of [['reference', corpus.referenceEncode(value)], ['procwire', advanced.encode(value)]]) {
      const d = advanced.decode(payloadOf(bytes));
      assert.strictEqual(Object.getPrototypeOf(d.buf), Buffer.prototype, label);
      assert.strictEqual(d.buf.constructor, Buffer, label);
      assert.ok(Buffer.isBuffer(d.buf), label);
      assert.strictEqual(Object.getPrototypeOf(d.u8), Uint8Array.prototype, label);
      assert.ok(!Buffer.isBuffer(d.u8), label);
      assert.strictEqual(Object.getPrototypeOf(d.u8c), Uint8ClampedArray.prototype, label);
      assert.strictEqual(Object.getPrototypeOf(d.i8), Int8Array.prototype, label);
      assert.deepStrictEqual(d, value, label);
    }
  });

  test('a pooled Buffer sends only its own bytes', T, () => {
    const pooled = Buffer.from('small');
    assert.notStrictEqual(pooled.buffer.byteLength, 5, 'precondition: Buffer.from pools small buffers');
    assert.strictEqual(advanced.encode(pooled).toString('hex'), '0000000bff0f5c000a05736d616c6c');
    assert.strictEqual(advanced.encode(Buffer.from('hi')).toString('hex'), '00000008ff0f5c000a026869');
    assert.strictEqual(advanced.encode(new Uint8Array([1, 2])).toString('hex'), '00000008ff0f5c0001020102');
    assert.strictEqual(advanced.encode({ a: 1 }).toString('hex'), '0000000aff0f6f22016149027b01');
  });

  test('constructor overrides pick the type index as Node does', T, () => {
    const b = Buffer.from('zz');
    b.constructor = Uint8Array;
    assert.strictEqual(advanced.encode(b).toString('hex'), '00000008ff0f5c0001027a7a');
    const u = new Uint8Array([1]);
    u.constructor = Buffer;
    const frame = advanced.encode(u);
    assert.strictEqual(frame.toString('hex'), '00000007ff0f5c000a0101');
    const d = advanced.decode(payloadOf(frame));
    assert.ok(Buffer.isBuffer(d));
    assert.strictEqual(d.constructor, Buffer);
  });

  test('Float16Array', { ...T, skip: corpus.float16Support().ok ? false : `skipped: ${corpus.float16Support().reason}` }, () => {
    const f = new globalThis.Float16Array([1.5, -2, 65504]);
    const ref = corpus.referenceEncode(f);
    assertSameBytes(advanced.encode(f), ref, 'Float16Array');
    const d = advanced.decode(payloadOf(ref));
    assert.strictEqual(Object.getPrototypeOf(d), globalThis.Float16Array.prototype);
    assert.deepStrictEqual(d, f);
  });

  test('MessagePort copy: getters run, Object.prototype setters do not', T, () => {
    const { port1, port2 } = new MessageChannel();
    let setterCalls = 0;
    let getterCalls = 0;
    try {
      Object.defineProperty(port1, 'foo', { value: 'own', enumerable: true, writable: true, configurable: true });
      Object.defineProperty(port1, 'g', { get() { getterCalls++; return 42; }, enumerable: true, configurable: true });
      Object.defineProperty(port1, '7', { value: 'seven', enumerable: true, configurable: true });
      Object.defineProperty(port1, 'hidden', { value: 'no', enumerable: false, configurable: true });
      Object.defineProperty(Object.prototype, 'foo', {
        set() { setterCalls++; }, get() { return 'polluted'; }, configurable: true,
      });
      Object.defineProperty(Object.prototype, '7', {
        set() { setterCalls++; }, configurable: true,
      });
      const value = { port: port1, again: port1 };
      const ref = corpus.referenceEncode(value);
      assert.strictEqual(setterCalls, 0, 'reference encoder ran a prototype setter');
      const calls = getterCalls;
      const actual = advanced.encode(value);
      assert.strictEqual(setterCalls, 0, 'procwire ran an Object.prototype setter during the copy');
      assert.strictEqual(getterCalls, calls + 1, 'procwire must read the getter once, as {...obj} does');
      assertSameBytes(actual, ref, 'MessagePort copy');
      const d = advanced.decode(payloadOf(actual));
      assert.strictEqual(setterCalls, 0, 'decode ran an Object.prototype setter');
      assert.deepStrictEqual(Object.keys(d.port), ['7', 'foo', 'g']);
      assert.strictEqual(Object.getOwnPropertyDescriptor(d.port, 'foo').value, 'own');
      assert.strictEqual(Object.getOwnPropertyDescriptor(d.port, '7').value, 'seven');
      assert.strictEqual(Object.getOwnPropertyDescriptor(d.port, 'g').value, 42);
      assert.strictEqual(d.again, d.port);
    } finally {
      delete Object.prototype.foo;
      delete Object.prototype[7];
      port1.close();
      port2.close();
    }
    assert.strictEqual(Object.prototype.foo, undefined);
  });

  test('a MessagePort that refers to itself: same outcome as Node', T, () => {
    const { port1, port2 } = new MessageChannel();
    try {
      port1.self = port1;
      const ref = corpus.referenceEncode(port1);
      assertSameBytes(advanced.encode(port1), ref, 'self-referencing port');
      let refOutcome;
      try {
        refOutcome = { value: corpus.referenceDecode(payloadOf(ref)) };
      } catch (err) {
        refOutcome = { err };
      }
      let ours;
      try {
        ours = { value: advanced.decode(payloadOf(ref)) };
      } catch (err) {
        ours = { err };
      }
      if (ours.err) assert.match(String(ours.err.code), /^ERR_PROCWIRE_/, String(ours.err.stack));
      if (refOutcome.err) assert.ok(ours.err, 'Node rejects this payload; procwire accepted it');
      else if (!ours.err) assert.deepStrictEqual(ours.value, refOutcome.value);
    } finally {
      port1.close();
      port2.close();
    }
  });

  test('a view over a SharedArrayBuffer sends its bytes, as Node does', T, () => {
    const v = new Uint8Array(new SharedArrayBuffer(6), 1, 4);
    v.set([1, 2, 3, 4]);
    const ref = corpus.referenceEncode(v);
    assertSameBytes(advanced.encode(v), ref, 'view over SAB');
    assert.deepStrictEqual(advanced.decode(payloadOf(ref)), new Uint8Array([1, 2, 3, 4]));
  });

  test('encode runs getters and propagates what they throw', T, () => {
    const boom = new Error('boom');
    assert.throws(() => advanced.encode({ get x() { throw boom; } }), (err) => err === boom);
  });
});

describe('advanced: decoded views borrow aligned memory', () => {
  const kinds = [...corpus.VIEW_KINDS, DataView, Buffer];
  for (const Kind of kinds) {
    test(`${Kind.name}: aliasing iff aligned, as Node`, T, () => {
      const size = Kind.BYTES_PER_ELEMENT || 1;
      const raw = corpus.bytes(size * 4, 3);
      const value = Kind === Buffer ? Buffer.from(raw)
        : Kind === DataView ? new DataView(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length))
          : new Kind(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length));
      const payload = payloadOf(advanced.encode(value));
      // ff 0f 5c 00 <index> <len> -> the view's bytes start at payload offset 6
      const dataAt = 6;
      assert.strictEqual(payload.length, dataAt + size * 4);
      for (let at = 0; at < 16; at++) {
        const input = placeAt(payload, at);
        const d = advanced.decode(input);
        const aligned = (at + dataAt) % size === 0;
        assert.strictEqual(Object.getPrototypeOf(d), Kind.prototype, `at ${at}`);
        assert.deepStrictEqual(d, value, `at ${at}`);
        assert.strictEqual(d.buffer === input.buffer, aligned, `at ${at}: aliasing should be ${aligned}`);
        if (aligned) {
          assert.strictEqual(d.byteOffset, at + dataAt);
          // writes show through: it really is the same memory
          input[dataAt] ^= 0xff;
          assert.strictEqual(new Uint8Array(d.buffer, d.byteOffset, 1)[0], payload[dataAt] ^ 0xff);
        } else {
          assert.strictEqual(d.byteOffset % size, 0);
          input[dataAt] ^= 0xff;
          assert.strictEqual(new Uint8Array(d.buffer, d.byteOffset, 1)[0], payload[dataAt]);
        }
        // Node's decoder borrows in exactly the same cases.
        const input2 = placeAt(payload, at);
        const r = corpus.referenceDecode(Buffer.from(input2.buffer, input2.byteOffset, input2.byteLength));
        assert.strictEqual(r.buffer === input2.buffer, aligned, `reference at ${at}`);
      }
    });
  }

  test('decode accepts any ArrayBufferView as input', T, () => {
    const payload = payloadOf(advanced.encode({ a: [1, 'x'] }));
    const padded = placeAt(payload, 8);
    const ab = padded.buffer;
    assert.deepStrictEqual(advanced.decode(new DataView(ab, 8, payload.length)), { a: [1, 'x'] });
    assert.deepStrictEqual(advanced.decode(Buffer.from(ab, 8, payload.length)), { a: [1, 'x'] });
    if (payload.length % 2 === 0) {
      assert.deepStrictEqual(advanced.decode(new Uint16Array(ab, 8, payload.length / 2)), { a: [1, 'x'] });
    }
  });
});

describe('advanced: rejections', () => {
  // ff 0f 5c <tag> ...
  const hostFrame = (...rest) => Buffer.from([0xff, 0x0f, 0x5c, ...rest]);

  test('host tag 2 and 255 -> ERR_PROCWIRE_BAD_HOST_TAG', T, () => {
    assertCoded(() => advanced.decode(hostFrame(2, 1, 1, 0)), 'ERR_PROCWIRE_BAD_HOST_TAG', 'tag 2');
    assertCoded(() => advanced.decode(hostFrame(0xff, 0x01, 1, 1, 0)), 'ERR_PROCWIRE_BAD_HOST_TAG', 'tag 255');
    assertCoded(() => advanced.decode(hostFrame(0x80, 0x80, 0x80, 0x80, 0x08)), 'ERR_PROCWIRE_BAD_HOST_TAG', 'tag 2^31');
    // inside a larger value, too
    const inner = Buffer.from([0xff, 0x0f, 0x41, 0x02, 0x49, 0x02, 0x5c, 0x02, 0x24, 0x00, 0x02]);
    assertCoded(() => advanced.decode(inner), 'ERR_PROCWIRE_BAD_HOST_TAG', 'nested tag 2');
  });

  test('type index 14 and 99 -> ERR_PROCWIRE_BAD_VIEW_TYPE', T, () => {
    assertCoded(() => advanced.decode(hostFrame(0, 14, 1, 0)), 'ERR_PROCWIRE_BAD_VIEW_TYPE', 'index 14');
    assertCoded(() => advanced.decode(hostFrame(0, 99, 1, 0)), 'ERR_PROCWIRE_BAD_VIEW_TYPE', 'index 99');
    assertCoded(() => advanced.decode(hostFrame(0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0)), 'ERR_PROCWIRE_BAD_VIEW_TYPE', 'index 2^32-1');
    if (!corpus.float16Support().ok) {
      // 13 is Float16Array on newer lines; without it, procwire may accept
      // it only if it can build one.
      try {
        const d = advanced.decode(hostFrame(0, 13, 2, 0, 0));
        assert.strictEqual(typeof globalThis.Float16Array, 'function');
        assert.ok(d instanceof globalThis.Float16Array);
      } catch (err) {
        assert.strictEqual(err.code, 'ERR_PROCWIRE_BAD_VIEW_TYPE');
      }
    }
  });

  test('Int32Array with byte length 3 -> ERR_PROCWIRE_BAD_VIEW_LENGTH', T, () => {
    assertCoded(() => advanced.decode(hostFrame(0, 5, 3, 1, 2, 3)), 'ERR_PROCWIRE_BAD_VIEW_LENGTH', 'Int32 len 3');
    assertCoded(() => advanced.decode(hostFrame(0, 8, 12, ...new Array(12).fill(0))), 'ERR_PROCWIRE_BAD_VIEW_LENGTH', 'Float64 len 12');
    assertCoded(() => advanced.decode(hostFrame(0, 3, 1, 0)), 'ERR_PROCWIRE_BAD_VIEW_LENGTH', 'Int16 len 1');
    assertCoded(() => advanced.decode(hostFrame(0, 11, 4, 0, 0, 0, 0)), 'ERR_PROCWIRE_BAD_VIEW_LENGTH', 'BigInt64 len 4');
  });

  test('view bytes past the end, and a length near 2^32 -> coded error', T, () => {
    assertCoded(() => advanced.decode(hostFrame(0, 1, 10, 1, 2)), /^ERR_PROCWIRE_/, 'short bytes');
    assertCoded(() => advanced.decode(hostFrame(0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 1)), /^ERR_PROCWIRE_/, 'len 2^32-1');
    assertCoded(() => advanced.decode(hostFrame(0, 1)), /^ERR_PROCWIRE_/, 'no length');
    assertCoded(() => advanced.decode(hostFrame()), /^ERR_PROCWIRE_/, 'no tag');
  });

  test('host tag 1 whose copy is not an object -> ERR_PROCWIRE_DECODE', T, () => {
    assertCoded(() => advanced.decode(hostFrame(1, 0x49, 0x02)), 'ERR_PROCWIRE_DECODE', 'tag 1 + smi');
    assertCoded(() => advanced.decode(hostFrame(1)), /^ERR_PROCWIRE_/, 'tag 1 + nothing');
  });

  test('wrong or missing version header -> ERR_PROCWIRE_DECODE', T, () => {
    for (const h of ['ff104902', 'ff7f4902', 'ffffffffff0f4902', '4902', '', 'ff', 'ff0f', '00', 'ff80']) {
      assertCoded(() => advanced.decode(Buffer.from(h, 'hex')), 'ERR_PROCWIRE_DECODE', `payload ${h}`);
    }
  });

  // Truncations of several valid payloads: every prefix either throws a
  // coded error or (only if it happens to be a whole value) decodes to what
  // Node's decoder also returns for it.
  test('truncated payloads at every byte position', T, () => {
    const samples = corpus.build().filter((c) => !c.large);
    let checked = 0;
    for (const c of samples) {
      const payload = payloadOf(corpus.referenceEncode(c.value));
      for (let n = 0; n < payload.length; n++) {
        const prefix = Buffer.from(payload.subarray(0, n));
        let value;
        try {
          value = advanced.decode(prefix);
        } catch (err) {
          assert.match(String(err && err.code), /^ERR_PROCWIRE_/, `${c.name} prefix ${n}: ${err && err.stack}`);
          checked++;
          continue;
        }
        let ref;
        assert.doesNotThrow(() => { ref = corpus.referenceDecode(prefix); },
          `${c.name} prefix ${n}: procwire returned a value Node rejects (${hex(prefix)})`);
        assertSameMeaning(value, ref, `${c.name} prefix ${n}`);
        checked++;
      }
    }
    corpus.cleanupAll(samples);
    assert.ok(checked > 3000, `only ${checked} prefixes`);
  });

  test('garbage and corrupted payloads never crash and only throw coded errors', T, () => {
    let seed = 12345;
    const rand = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed >>> 8;
    };
    const samples = corpus.build().filter((c) => !c.large);
    const payloads = samples.map((c) => payloadOf(corpus.referenceEncode(c.value)));
    corpus.cleanupAll(samples);
    let accepted = 0;
    let rejected = 0;
    const tryOne = (buf, label) => {
      let value;
      try {
        value = advanced.decode(buf);
      } catch (err) {
        assert.match(String(err && err.code), /^ERR_PROCWIRE_/, `${label} ${hex(buf)}: ${err && err.stack}`);
        rejected++;
        return;
      }
      accepted++;
      let ref;
      try {
        ref = corpus.referenceDecode(Buffer.from(buf));
      } catch (err) {
        assert.fail(`${label}: procwire accepted ${hex(buf)} which Node rejects (${err.message})`);
      }
      // Both decoders saw the same bytes; they agree on what it means.
      assertSameMeaning(value, ref, `${label} ${hex(buf)}`);
    };
    // random bytes behind a valid header
    for (let i = 0; i < 3000; i++) {
      const n = rand() % 40;
      const buf = Buffer.alloc(n + 2);
      buf[0] = 0xff;
      buf[1] = 0x0f;
      for (let j = 0; j < n; j++) buf[j + 2] = rand() & 0xff;
      // make host objects likely
      if (n > 0 && (rand() & 1)) buf[2] = 0x5c;
      tryOne(buf, 'random');
    }
    // valid payloads with one or two bytes changed
    for (let i = 0; i < 6000; i++) {
      const src = payloads[rand() % payloads.length];
      const buf = Buffer.from(src);
      const flips = 1 + (rand() & 1);
      for (let k = 0; k < flips; k++) {
        const pos = 2 + (rand() % Math.max(1, buf.length - 2));
        if (pos < buf.length) buf[pos] = rand() & 0xff;
      }
      tryOne(buf, 'mutated');
    }
    assert.ok(accepted + rejected === 9000);
    assert.ok(rejected > 100);
  });

  test('encode of unserializable values -> ERR_PROCWIRE_UNSERIALIZABLE', T, () => {
    const bad = {
      'function': () => 1,
      'symbol': Symbol('s'),
      'SharedArrayBuffer': new SharedArrayBuffer(8),
      'function in object': { f() {} },
      'symbol in array': [1, Symbol.iterator],
      'SharedArrayBuffer in object': { s: new SharedArrayBuffer(4) },
      'Proxy': new Proxy({}, {}),
      'WeakMap': new WeakMap(),
      'Promise': Promise.resolve(1),
    };
    const failures = [];
    for (const [name, value] of Object.entries(bad)) {
      assert.throws(() => corpus.referenceEncode(value), `reference accepts ${name}?`);
      try {
        advanced.encode(value);
        failures.push(`${name}: no error`);
      } catch (err) {
        if (err.code !== 'ERR_PROCWIRE_UNSERIALIZABLE') {
          failures.push(`${name}: ${err.constructor.name} code=${err.code} message=${err.message}`);
        }
      }
    }
    assert.deepStrictEqual(failures, []);
  });

  test('decode of a non-view -> ERR_PROCWIRE_INVALID_ARG', T, () => {
    for (const v of ['ff0f', [0xff, 0x0f], null, undefined, new ArrayBuffer(2)]) {
      assertCoded(() => advanced.decode(v), 'ERR_PROCWIRE_INVALID_ARG', String(v));
      assertCoded(() => json.decode(v), 'ERR_PROCWIRE_INVALID_ARG', String(v));
    }
  });
});

describe('json codec', () => {
  const cases = corpus.build().filter((c) => c.json);
  for (const c of cases) {
    test(`json ${c.name}`, T, () => {
      const expected = corpus.referenceJsonEncode(c.value);
      const frame = json.encode(c.value);
      assertSameBytes(frame, expected, c.name);
      assert.strictEqual(frame[frame.length - 1], 0x0a);
      const d = json.decode(frame.subarray(0, frame.length - 1));
      assert.deepStrictEqual(d, corpus.jsonExpected(c));
      // Any view of the same bytes: a plain Uint8Array is read as it is,
      // other views through a Buffer over their memory.
      const line = new Uint8Array(frame.subarray(0, frame.length - 1));
      assert.deepStrictEqual(json.decode(line), corpus.jsonExpected(c), `${c.name} (Uint8Array)`);
      assert.deepStrictEqual(json.decode(new DataView(line.buffer)), corpus.jsonExpected(c), `${c.name} (DataView)`);
    });
  }
  test('cleanup ports', () => corpus.cleanupAll(cases));

  test('invalid JSON -> ERR_PROCWIRE_DECODE', T, () => {
    for (const text of ['{a', '', ' ', '{"a":1}}', 'undefined', '[1,]', "'x'", '\u00ff', '{"a":1}\n{"b":2}']) {
      assertCoded(() => json.decode(Buffer.from(text, 'utf8')), 'ERR_PROCWIRE_DECODE', JSON.stringify(text));
    }
  });

  test('invalid UTF-8 decodes as Node\'s StringDecoder reads it', T, () => {
    for (const h of ['22ff22', '22c322', '22e282', '22eda08022', '22f09f9822', '22c0af22']) {
      const buf = Buffer.from(h, 'hex');
      const text = new StringDecoder('utf8').write(buf);
      let expected;
      try {
        expected = { value: JSON.parse(text) };
      } catch {
        expected = null;
      }
      for (const view of [buf, new Uint8Array(buf), new DataView(buf.buffer, buf.byteOffset, buf.length)]) {
        if (expected) assert.deepStrictEqual(json.decode(view), expected.value, h);
        else assertCoded(() => json.decode(view), 'ERR_PROCWIRE_DECODE', h);
      }
    }
  });

  test('json encode of a value JSON.stringify rejects -> coded error', T, () => {
    const circular = {};
    circular.self = circular;
    const failures = [];
    for (const [name, value] of [['BigInt', { n: 1n }], ['circular', circular]]) {
      assert.throws(() => JSON.stringify(value));
      try {
        json.encode(value);
        failures.push(`${name}: no error`);
      } catch (err) {
        if (err.code !== 'ERR_PROCWIRE_UNSERIALIZABLE') {
          failures.push(`${name}: ${err.constructor.name} code=${err.code} message=${err.message}`);
        }
      }
    }
    assert.deepStrictEqual(failures, []);
  });

  test('json encode of top-level undefined/function writes what Node writes', T, () => {
    // Node: JSON.stringify(x) + '\n' (process.send itself refuses these).
    assert.strictEqual(json.encode(undefined).toString(), 'undefined\n');
  });
});
