'use strict';
// procwire.codec.advanced / procwire.codec.json: one message to one frame and
// back, byte for byte as Node's child_process IPC does.
//
// advanced goes through the JavaScript fast path (./codec/advanced-fast.js)
// first; whatever that path declines (Map, Set, Error, proxies, hostile or
// unusual bytes, ...) goes to V8's ValueSerializer/ValueDeserializer in the
// binding, which write and read exactly what Node does.

const { Buffer } = require('buffer');
const { binding, FORMAT } = require('./native');
const { invalidArg } = require('./validate');
const { makeError } = require('./errors');
const fast = require('./codec/advanced-fast');
// json is JSON.stringify/JSON.parse plus UTF-8 either way; done here in
// JavaScript (Node's own path) it skips the native call and the external
// Buffer the binding returns, which measured as fast or faster for every
// shape of bench/codec.js. Same bytes and coded errors as the binding
// (test/fallback.test.js compares them).
const jsCodec = require('./fallback/codec');

jsCodec.setup(Buffer, makeError);

if (typeof binding.arrayExtraKeys === 'function') fast.configure({ arrayExtraKeys: binding.arrayExtraKeys });

const ADVANCED = FORMAT.advanced;
const NOT_FAST = fast.NOT_FAST;

// value -> a fresh Buffer holding the whole frame.
function encodeAdvanced(value) {
  const frame = fast.encodeCopy(value);
  return frame !== null ? frame : binding.encode(ADVANCED, value);
}

function decodeAdvanced(payload) {
  const value = fast.decode(payload, false);
  return value !== NOT_FAST ? value : binding.decode(ADVANCED, payload);
}

function makeCodec(name) {
  const format = FORMAT[name];
  const advanced = format === ADVANCED;
  return Object.freeze({
    name,
    // value -> Buffer holding a whole frame (advanced: u32 BE length + V8
    // payload; json: JSON text + '\n').
    encode(value) {
      return advanced ? encodeAdvanced(value) : jsCodec.encodeJson(value);
    },
    // payload (no length header / no '\n') -> value.
    decode(payload) {
      if (!ArrayBuffer.isView(payload)) {
        throw invalidArg('payload must be a Buffer, TypedArray or DataView');
      }
      return advanced ? decodeAdvanced(payload) : jsCodec.decodeJson(payload);
    },
  });
}

module.exports = {
  advanced: makeCodec('advanced'),
  json: makeCodec('json'),
};
