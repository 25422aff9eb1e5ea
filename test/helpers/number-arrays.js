'use strict';
// Arrays of numbers (and a few of other things) for the advanced fast path
// (lib/codec/advanced-fast.js, writeArray and readDense), for
// test/codec-arrays.test.js: each case builds its value anew, so a getter's
// call count starts at 0. Arrays are built by literals and Array.from, which
// keep them packed (an array V8 keeps holey is written sparse by V8 even
// without a hole: a representation the fast path cannot see).
//
// Each case: [name, build() -> { value, calls() }, declined]; `declined`
// says that the fast path leaves it to ValueSerializer (and must not have
// run a getter when it does).

// Short and long lengths, and those around the fast path's hand-over of
// long arrays to ValueSerializer (from 128).
const LENGTHS = [0, 1, 2, 15, 16, 17, 100, 127, 128, 129];
const LONG_ARRAY = 128;

// Made by Array.from, whose arrays start empty and change kind with what is
// stored in them: a literal `[]` in a helper would follow its allocation
// site, which remembers the kinds of the arrays made there before (one that
// once held an object starts its next arrays generic, and V8 then writes a
// number array's Smis as Smis among doubles).
function built(n, f) {
  return Array.from({ length: n }, (_, i) => f(i));
}

function plain(value) {
  return () => ({ value, calls: () => 0 });
}

// An array whose element `at` is a getter that counts its calls; its
// element `first` (if any) a string, so the getter comes after a non-number.
function withElementGetter(n, at, first = -1) {
  return () => {
    let calls = 0;
    const a = built(n, (i) => (i === first ? 's' : i));
    Object.defineProperty(a, at, { get() { calls++; return 7; }, enumerable: true, configurable: true });
    return { value: a, calls: () => calls };
  };
}

function withNamedGetter(n) {
  return () => {
    let calls = 0;
    const a = built(n, (i) => i);
    Object.defineProperty(a, 'extra', { get() { calls++; return 'x'; }, enumerable: true });
    return { value: a, calls: () => calls };
  };
}

function numberCases() {
  const cases = [];
  for (const n of LENGTHS) {
    const long = n >= LONG_ARRAY;
    cases.push([`${n} small ints`, plain(built(n, (i) => i * 37 - 1000)), long]);
    cases.push([`${n} doubles`, plain(built(n, (i) => i * 0.37 + 0.5)), long]);
    // One double makes V8 keep every element as a double.
    cases.push([`${n} ints, the last a double`, plain(built(n, (i) => (i === n - 1 ? 0.5 : i))), long]);
    cases.push([`${n} ints, the first -0`, plain(built(n, (i) => (i === 0 ? -0 : i))), long]);
    cases.push([`${n} ints and strings`, plain(built(n, (i) => (i % 3 === 0 ? `s${i}` : i))), long]);
    // An object before the first double: an array that held doubles only
    // keeps its integers as doubles when it turns generic.
    cases.push([`${n} ints, objects and doubles`, plain(built(n, (i) => [i, { i }, i + 0.5, null][i % 4])), long]);
  }
  return cases;
}

function boundaryCases() {
  return [
    // Every int32 is a Smi in Node's 64-bit builds; the varint grows at 7-bit steps.
    ['Smi and int32 bounds', plain([0, 1, -1, 63, 64, -64, -65, 127, 128, 8191, 8192, -8193, 2 ** 30 - 1, 2 ** 30,
      -(2 ** 30), -(2 ** 30) - 1, 2 ** 31 - 1, -(2 ** 31)])],
    ['just past int32', plain([1, 2 ** 31])],
    ['just below int32', plain([1, -(2 ** 31) - 1])],
    ['uint32 and safe integers', plain([2 ** 32 - 1, 2 ** 32, Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER])],
    ['-0 alone', plain([-0])],
    ['-0 among ints', plain([1, -0, 2])],
    ['0 and -0', plain([0, -0])],
    ['NaN alone', plain([NaN])],
    ['NaN among ints', plain([1, NaN, 3])],
    ['infinities', plain([Infinity, -Infinity, 1])],
    ['tiny and huge doubles', plain([0.1, 1e300, 5e-324, -2.5, Number.MIN_VALUE, Number.MAX_VALUE])],
    ['every kind of value', plain([1, 2.5, 'x', null, true, false, undefined, { a: 1 }, [3, 4.5], -0, NaN, 10n])],
    ['own undefined elements', plain([undefined, 1, undefined])],
    ['nested number arrays', plain([[1, 2], [3.5, 4.5], [], [-0], [[1]]])],
    ['number arrays in an object', plain({ xs: [1, 2, 3], ys: [1.5, 2], zs: built(40, (i) => i * 1.5) })],
    ['the same array twice', plain((() => { const a = [1, 2.5]; return [a, a, { a }]; })())],
    ['a named property after 3 elements', plain(Object.assign([1, 2, 3], { foo: 'bar', 7.5: 1 }))],
    ['a named property after 20 elements', plain(Object.assign(built(20, (i) => i + 0.25), { foo: 'bar' }))],
  ];
}

function declinedCases() {
  const holey = (n, at) => () => {
    const a = built(n, (i) => i);
    delete a[at];
    return { value: a, calls: () => 0 };
  };
  const hidden = (n, at) => () => {
    const a = built(n, (i) => i);
    Object.defineProperty(a, at, { value: 5, enumerable: false, writable: true, configurable: true });
    return { value: a, calls: () => 0 };
  };
  return [
    ['a hole in 3', plain([1, , 3]), true], // eslint-disable-line no-sparse-arrays
    ['a hole in 20', holey(20, 5), true],
    ['the last of 20 a hole', holey(20, 19), true],
    ['a non-enumerable element in 3', hidden(3, 1), true],
    ['a non-enumerable element in 20', hidden(20, 19), true],
    ['an element getter in 3', withElementGetter(3, 0), true],
    ['an element getter first of 20', withElementGetter(20, 0), true],
    ['an element getter last of 20', withElementGetter(20, 19), true],
    ['an element getter in 127', withElementGetter(127, 64), true],
    ['an element getter after a string', withElementGetter(20, 10, 2), true],
    ['an element getter right after a string', withElementGetter(3, 1, 0), true],
    ['a named getter after 3 elements', withNamedGetter(3), true],
    ['a named getter after 20 elements', withNamedGetter(20), true],
  ];
}

function arrayCases() {
  return [...numberCases(), ...boundaryCases().map(([name, build]) => [name, build, false]), ...declinedCases()];
}

module.exports = { arrayCases };
