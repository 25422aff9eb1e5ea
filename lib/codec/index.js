'use strict';
// The codec registry, like Node's lib/internal/child_process/serialization.js:
// each codec is one object (name, the binding's format id, its framing,
// encode, decode), and everything that needs a codec asks here by name. A new
// codec is one entry in CODECS (and its format in ./formats.js).
//
// procwire.codec.advanced / procwire.codec.json: one message to one frame and
// back, byte for byte as Node's child_process IPC does.
//
// advanced goes through the JavaScript fast path (./advanced-fast.js) first;
// whatever that path declines (Map, Set, Error, proxies, hostile or unusual
// bytes, ...) goes to V8's ValueSerializer/ValueDeserializer in the binding,
// which write and read exactly what Node does.

const { Buffer } = require('buffer');
const { binding } = require('../native');
const { makeError, invalidArg } = require('../errors');
const { FORMATS } = require('./formats');
const { refuseSeparated } = require('./separate');
// json is JSON.stringify/JSON.parse plus UTF-8 either way; done in
// JavaScript (Node's own path, ../fallback/codec.js) it skips the native
// call and the external Buffer the binding returns, which measured as fast
// or faster for every shape of bench/codec.js. Same bytes and coded errors
// as the binding (test/fallback.test.js compares them).
//
// Both JavaScript halves are loaded on first use, not here: a native json
// channel (a forked child's, the common case) encodes and decodes in the
// addon and never calls them, and loading them (with v8 and the advanced
// fast path's 1,300 lines) was a third of such a child's start-up.
let jsCodec = null;
function jsonCodec() {
  if (jsCodec === null) {
    // Its advanced half uses the fast path, configured as before.
    fastPath();
    jsCodec = require('../fallback/codec');
    jsCodec.setup(Buffer, makeError);
  }
  return jsCodec;
}

let fast = null;
// The advanced format's JavaScript fast path, configured with the addon's
// string helpers; lib/channel/ takes it from here when a channel is advanced.
function fastPath() {
  if (fast === null) {
    const loaded = require('./advanced-fast');
    loaded.configure({
      writeString: binding.writeString,
      readOneByteString: binding.readOneByteString,
    });
    fast = loaded;
  }
  return fast;
}

function checkPayload(payload) {
  if (!ArrayBuffer.isView(payload)) throw invalidArg('payload must be a Buffer, TypedArray or DataView');
}

// name -> { name, id, framing, headerBytes, trailerBytes, encode, decode[, decodeRange] }
//   encode(value) -> Buffer holding a whole frame
//   decode(payload) -> value (payload: the frame without its framing bytes)
//   decodeRange(bytes, start, length) -> value, for lib/ only: the payload at
//       bytes[start, start + length) of a Buffer, without a view per call
//       (a channel's batch of small frames)
// Each codec is made on its first use (see makeAdvanced), then kept.
const CODECS = new Map();

// The engine's own RangeError from ValueSerializer (a value nested deeper
// than it can recurse) becomes procwire's coded error, the RangeError as its
// cause, as a channel's send() reports it; json's are mapped in its encoder
// (lib/fallback/codec.js). Errors that already have a code stay. Only the
// path past the JavaScript encoder pays for the try, which declines what it
// cannot write (a RangeError of its own included) instead of throwing.
function unserializable(err) {
  if (!(err instanceof RangeError) || err.code !== undefined) return err;
  return makeError('ERR_PROCWIRE_UNSERIALIZABLE', `the message cannot be serialized: ${err.message}`, err);
}

function makeCodec(format, encode, decode, decodeRange) {
  const entry = {
    ...format,
    encode,
    decode(payload) {
      checkPayload(payload);
      return decode(payload);
    },
  };
  if (decodeRange !== undefined) Object.defineProperty(entry, 'decodeRange', { value: decodeRange });
  return Object.freeze(entry);
}

// The advanced codec loads the fast path when it is first asked for (an
// advanced channel's set-up), and its functions hold the path and its
// NOT_FAST marker as constants: a message pays no check that they are
// loaded (a lazy lookup per message measured +4% CPU per round trip).
function makeAdvanced() {
  const path = fastPath();
  const { NOT_FAST } = path;
  return makeCodec(FORMATS.advanced,
    (value) => {
      const frame = path.encodeCopy(value);
      if (frame !== null) return frame;
      refuseSeparated(value);
      try {
        return binding.encode(FORMATS.advanced.id, value);
      } catch (err) {
        throw unserializable(err);
      }
    },
    (payload) => {
      const value = path.decode(payload, false);
      return value !== NOT_FAST ? value : binding.decode(FORMATS.advanced.id, payload);
    },
    (bytes, start, length) => {
      const value = path.decodeRange(bytes, start, length);
      return value !== NOT_FAST ? value : binding.decode(FORMATS.advanced.id, bytes.subarray(start, start + length));
    });
}

function makeJson() {
  return makeCodec(FORMATS.json, (value) => jsonCodec().encodeJson(value), (payload) => jsonCodec().decodeJson(payload));
}

const MAKERS = { advanced: makeAdvanced, json: makeJson };

// The codec called `name`, or undefined.
function codecFor(name) {
  let codec = CODECS.get(name);
  if (codec === undefined && typeof name === 'string' && Object.hasOwn(MAKERS, name)) {
    codec = MAKERS[name]();
    CODECS.set(name, codec);
  }
  return codec;
}

// Every codec's name, for validation messages.
function codecNames() {
  return Object.keys(MAKERS);
}

// The public procwire.codec: one enumerable property per codec, made on
// first read (then a plain data property). The registry functions live
// beside it (not enumerable), for lib/ only.
const publicCodecs = {};
for (const name of Object.keys(MAKERS)) {
  Object.defineProperty(publicCodecs, name, {
    enumerable: true,
    configurable: true,
    get() {
      const codec = codecFor(name);
      Object.defineProperty(publicCodecs, name, { value: codec, enumerable: true, writable: true, configurable: true });
      return codec;
    },
  });
}
Object.defineProperties(publicCodecs, {
  codecFor: { value: codecFor },
  codecNames: { value: codecNames },
  fastPath: { value: fastPath },
});

module.exports = publicCodecs;
