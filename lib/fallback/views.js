'use strict';
// The untamperable accessors of ArrayBufferViews, taken from the intrinsic
// prototypes at load, so a view whose own `buffer`/`byteOffset` was replaced
// is still read for what it is. Shared by the fallback codec and framer.

const util = require('util');

const { Buffer } = require('buffer');

const getter = (proto, name) => Object.getOwnPropertyDescriptor(proto, name).get;
const TypedArrayPrototype = Object.getPrototypeOf(Uint8Array.prototype);
const typedArrayBuffer = getter(TypedArrayPrototype, 'buffer');
const typedArrayByteOffset = getter(TypedArrayPrototype, 'byteOffset');
const typedArrayByteLength = getter(TypedArrayPrototype, 'byteLength');
const bufferToString = Buffer.prototype.toString;

// Buffer's per-encoding slice method (`latin1Slice`, `ucs2Slice`,
// `utf8Slice`: toString() without its argument handling), to be called on
// any Uint8Array. Every Node line procwire supports has them; elsewhere
// toString(encoding) through a Buffer over the view's memory stands in.
function bufferSlice(method, encoding) {
  if (typeof Buffer.prototype[method] === 'function') return Buffer.prototype[method];
  return function slice(from, to) {
    const buffer = Buffer.from(typedArrayBuffer.call(this), typedArrayByteOffset.call(this), typedArrayByteLength.call(this));
    return bufferToString.call(buffer, encoding, from, to);
  };
}

module.exports = {
  TypedArrayPrototype,
  typedArrayTag: getter(TypedArrayPrototype, Symbol.toStringTag),
  typedArrayBuffer,
  typedArrayByteOffset,
  typedArrayByteLength,
  dataViewBuffer: getter(DataView.prototype, 'buffer'),
  dataViewByteOffset: getter(DataView.prototype, 'byteOffset'),
  dataViewByteLength: getter(DataView.prototype, 'byteLength'),
  isDataView: util.types.isDataView,
  bufferSlice,
};
