'use strict';
// The untamperable accessors of ArrayBufferViews, taken from the intrinsic
// prototypes at load, so a view whose own `buffer`/`byteOffset` was replaced
// is still read for what it is. Shared by the fallback codec and framer.

const util = require('util');

const getter = (proto, name) => Object.getOwnPropertyDescriptor(proto, name).get;
const TypedArrayPrototype = Object.getPrototypeOf(Uint8Array.prototype);

module.exports = {
  TypedArrayPrototype,
  typedArrayTag: getter(TypedArrayPrototype, Symbol.toStringTag),
  typedArrayBuffer: getter(TypedArrayPrototype, 'buffer'),
  typedArrayByteOffset: getter(TypedArrayPrototype, 'byteOffset'),
  typedArrayByteLength: getter(TypedArrayPrototype, 'byteLength'),
  dataViewBuffer: getter(DataView.prototype, 'buffer'),
  dataViewByteOffset: getter(DataView.prototype, 'byteOffset'),
  dataViewByteLength: getter(DataView.prototype, 'byteLength'),
  isDataView: util.types.isDataView,
};
