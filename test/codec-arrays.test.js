'use strict';
// Arrays of numbers through the advanced fast path
// (lib/codec/advanced-fast.js, writeArray and readDense), side by side with
// v8.serialize: ints at the Smi and int32 bounds, -0, NaN, doubles, holes,
// getters, numbers mixed with other values, at the lengths around the fast
// path's bounds (test/helpers/number-arrays.js). The fast path writes
// v8.serialize's bytes or declines before any getter runs; procwire's codec
// writes v8.serialize's bytes either way; both decoders read them back to
// what v8.deserialize makes.

const test = require('node:test');
const assert = require('node:assert');
const v8 = require('v8');
const procwire = require('..');
const fast = require('../lib/codec/advanced-fast');
const { arrayCases } = require('./helpers/number-arrays');

function hexOf(bytes) {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}

// The same value, compared by what V8 writes for it: a decoded array is
// holey, as ValueDeserializer makes it, and is written again the same way.
function assertSameDecoded(actual, expected, what) {
  assert.strictEqual(hexOf(v8.serialize(actual)), hexOf(v8.serialize(expected)), what);
  assert.deepStrictEqual(actual, expected, what);
}

for (const [name, build, declined] of arrayCases()) {
  test(name, () => {
    const reference = v8.serialize(build().value);
    const probe = build();
    const frame = fast.encode(probe.value);
    if (declined) {
      assert.strictEqual(frame, null, `${name}: the fast path wrote it`);
      assert.strictEqual(probe.calls(), 0, `${name}: a getter ran on the fast path`);
    } else {
      assert.notStrictEqual(frame, null, `${name}: the fast path declined it`);
      assert.strictEqual(hexOf(frame.subarray(4)), hexOf(reference), `${name}: fast path bytes`);
    }
    const viaCodec = build();
    assert.strictEqual(hexOf(procwire.codec.advanced.encode(viaCodec.value).subarray(4)), hexOf(reference),
      `${name}: procwire.codec.advanced bytes`);
    assert.ok(viaCodec.calls() <= 1, `${name}: a getter ran ${viaCodec.calls()} times`);
    const expected = v8.deserialize(reference);
    const decoded = fast.decode(reference);
    if (decoded !== fast.NOT_FAST) assertSameDecoded(decoded, expected, `${name}: fast decoder`);
    assertSameDecoded(procwire.codec.advanced.decode(reference), expected, `${name}: procwire.codec.advanced.decode`);
  });
}
