'use strict';
// procwire.codec.advanced / procwire.codec.json: one message to one frame and
// back, byte for byte as Node's child_process IPC does.

const { binding, FORMAT } = require('./native');
const { invalidArg } = require('./validate');

function makeCodec(name) {
  const format = FORMAT[name];
  return Object.freeze({
    name,
    // value -> Buffer holding a whole frame (advanced: u32 BE length + V8
    // payload; json: JSON text + '\n').
    encode(value) {
      return binding.encode(format, value);
    },
    // payload (no length header / no '\n') -> value.
    decode(payload) {
      if (!ArrayBuffer.isView(payload)) {
        throw invalidArg('payload must be a Buffer, TypedArray or DataView');
      }
      return binding.decode(format, payload);
    },
  });
}

module.exports = {
  advanced: makeCodec('advanced'),
  json: makeCodec('json'),
};
