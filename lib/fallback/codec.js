'use strict';
// The pure-JavaScript codec behind procwire's fallback binding: the same
// frames as the native addon, byte for byte, made the way Node's own
// child_process serialization makes them (require('v8')'s DefaultSerializer
// with host objects written as lib/internal/child_process/serialization.js
// writes them), and the same coded errors when decoding hostile input.
//
//   encode(format, value)          -> Buffer holding one whole frame
//   decode(format, view[, copy])   -> value (payload only); `copy` makes
//                                     decoded views copy instead of borrowing
//                                     the input memory (reassembled frames)
//
// setup(Buffer, makeError) must be called once before use (binding.setup).

const v8 = require('v8');
const util = require('util');
const { scanForOversizedBuffers, TILDE } = require('./v8-scan');
const fast = require('../codec/advanced-fast');
const { FORMATS } = require('../codec/formats');
const { refuseSeparated } = require('../codec/separate');

const state = {
  Buffer: require('buffer').Buffer,
  makeError: null,
};

// Intrinsics, captured before user code can replace them.
const JSONStringify = JSON.stringify;
const JSONParse = JSON.parse;
const ObjectKeys = Object.keys;
const ObjectDefineProperty = Object.defineProperty;
const ObjectGetPrototypeOf = Object.getPrototypeOf;
const ArrayBufferIsView = ArrayBuffer.isView;
const {
  typedArrayTag, typedArrayBuffer, typedArrayByteOffset, typedArrayByteLength,
  dataViewBuffer, dataViewByteOffset, dataViewByteLength, isDataView, bufferSlice,
} = require('./views');
const isNativeError = util.types.isNativeError;
const bufferToString = state.Buffer.prototype.toString;
const utf8Slice = bufferSlice('utf8Slice', 'utf8');
const bufferWriteUInt32BE = state.Buffer.prototype.writeUInt32BE;
const Uint8ArraySet = Uint8Array.prototype.set;

// Node's host-object tags, then its view type indexes (lib/v8.js); 10 is
// Node's Buffer, 13 Float16Array where the runtime has it.
const { HOST_TAG, VIEW_INDEX, VIEW_CTOR_BY_INDEX: CTOR_BY_INDEX, VIEW_ELEMENT_SIZE,
  VIEW_INDEX_BY_NAME: INDEX_BY_NAME } = require('../protocol');
const VIEW_TAG = HOST_TAG.VIEW;
const OTHER_HOST_OBJECT_TAG = HOST_TAG.OTHER;
const BUFFER_INDEX = VIEW_INDEX.BUFFER;
const FLOAT16_INDEX = VIEW_INDEX.FLOAT16;
const Float16 = CTOR_BY_INDEX[FLOAT16_INDEX];

function bytesPerElement(index) {
  return VIEW_ELEMENT_SIZE[index] || 1;
}

function isKnownViewIndex(index) {
  return index <= 12 || (index === FLOAT16_INDEX && Float16 !== null);
}

// The view's real buffer/offset/length, whatever its own properties say.
function viewParts(view) {
  if (isDataView(view)) {
    return [dataViewBuffer.call(view), dataViewByteOffset.call(view), dataViewByteLength.call(view)];
  }
  return [typedArrayBuffer.call(view), typedArrayByteOffset.call(view), typedArrayByteLength.call(view)];
}

// The index of the view's real type, or -1.
function viewTypeIndex(view) {
  if (isDataView(view)) return 9;
  const name = typedArrayTag.call(view);
  const index = name === undefined ? undefined : INDEX_BY_NAME[name];
  return index === undefined ? -1 : index;
}

function coded(code, message, cause) {
  return state.makeError(code, message, cause);
}

class Encoder extends v8.DefaultSerializer {
  _writeHostObject(object) {
    if (ArrayBufferIsView(object)) {
      // Whether it is a Buffer follows an ordinary read of `constructor`
      // compared with the real Buffer, exactly as Node decides.
      let index;
      if (object.constructor === state.Buffer) {
        index = BUFFER_INDEX;
      } else {
        index = viewTypeIndex(object);
        if (index < 0) throw coded('ERR_PROCWIRE_UNSERIALIZABLE', 'this kind of ArrayBufferView cannot be serialized');
      }
      const [buffer, offset, length] = viewParts(object);
      this.writeUint32(VIEW_TAG);
      this.writeUint32(index);
      this.writeUint32(length);
      // Only the view's own bytes: a view of a pooled Buffer must not leak the pool.
      if (length > 0) this.writeRawBytes(new Uint8Array(buffer, offset, length));
      return;
    }
    // Any other host object (a MessagePort, ...): a shallow copy made like
    // {...object}, its properties defined on the copy so that no setter on
    // Object.prototype runs.
    this.writeUint32(OTHER_HOST_OBJECT_TAG);
    const copy = {};
    const keys = ObjectKeys(object);
    for (let i = 0; i < keys.length; i++) {
      ObjectDefineProperty(copy, keys[i], {
        value: object[keys[i]], writable: true, enumerable: true, configurable: true,
      });
    }
    this.writeValue(copy);
  }

  _getDataCloneError(message) {
    return coded('ERR_PROCWIRE_UNSERIALIZABLE', String(message));
  }

  // Node's IPC cannot share memory with another process.
  _getSharedArrayBufferId() {
    throw coded('ERR_PROCWIRE_UNSERIALIZABLE', 'a SharedArrayBuffer cannot be sent to another process');
  }
}

const PLACEHOLDER = new Uint8Array(4);

function encodeAdvanced(value) {
  // The JavaScript fast path first (same bytes); DefaultSerializer for what
  // it declines.
  const fastFrame = fast.encodeCopy(value);
  if (fastFrame !== null) return fastFrame;
  refuseSeparated(value);
  const ser = new Encoder();
  // Room for the length header first, then the V8 header and the value.
  ser.writeRawBytes(PLACEHOLDER);
  ser.writeHeader();
  ser.writeValue(value);
  const frame = ser.releaseBuffer();
  const payload = frame.length - 4;
  if (payload > 0xffffffff) {
    throw coded('ERR_PROCWIRE_MESSAGE_TOO_LARGE', 'message is larger than the 4 GiB the length header can state');
  }
  bufferWriteUInt32BE.call(frame, payload, 0);
  return frame;
}

// Whether err is an engine error of the class called `name` (TypeError,
// RangeError), read without trusting its own properties.
function isNativeErrorNamed(err, name) {
  if (!isNativeError(err)) return false;
  const proto = ObjectGetPrototypeOf(err);
  return proto !== null && typeof proto.constructor === 'function' && proto.constructor.name === name;
}

function unserializableJson(err) {
  let message;
  try { message = String(err); } catch { message = 'value cannot be serialized as JSON'; }
  return coded('ERR_PROCWIRE_UNSERIALIZABLE', message, err);
}

function encodeJson(value) {
  let text;
  try {
    text = JSONStringify(value);
  } catch (err) {
    // JSON.stringify's own TypeErrors (BigInt, cycles) and RangeErrors (a
    // text over V8's maximum string length, nesting too deep) become coded
    // errors; anything else (a throwing toJSON) stays the user's.
    if (!isNativeErrorNamed(err, 'TypeError') && !isNativeErrorNamed(err, 'RangeError')) throw err;
    throw unserializableJson(err);
  }
  if (text === undefined) text = 'undefined';
  // A text of exactly V8's maximum length has no room for its newline.
  let line;
  try {
    line = `${text}\n`;
  } catch (err) {
    throw unserializableJson(err);
  }
  return state.Buffer.from(line, 'utf8');
}

class Decoder extends v8.DefaultDeserializer {
  constructor(view, ab, base, copyViews) {
    super(view);
    this._ab = ab;
    this._base = base;
    this._copyViews = copyViews;
    this._failure = null;
  }

  // Remembers the coded error so decode() reports it even if V8 wraps it.
  _fail(code, message) {
    const err = coded(code, message);
    if (this._failure === null) this._failure = err;
    throw err;
  }

  _readHostObject() {
    let tag;
    try {
      tag = this.readUint32();
    } catch {
      this._fail('ERR_PROCWIRE_DECODE', 'truncated host object');
    }
    if (tag === OTHER_HOST_OBJECT_TAG) {
      const value = this.readValue();
      if ((typeof value !== 'object' || value === null) && typeof value !== 'function') {
        this._fail('ERR_PROCWIRE_DECODE', 'host object copy is not an object');
      }
      return value;
    }
    if (tag !== VIEW_TAG) this._fail('ERR_PROCWIRE_BAD_HOST_TAG', 'unknown host object tag');
    let index;
    let byteLength;
    try {
      index = this.readUint32();
      byteLength = this.readUint32();
    } catch {
      this._fail('ERR_PROCWIRE_DECODE', 'truncated ArrayBufferView');
    }
    if (!isKnownViewIndex(index)) this._fail('ERR_PROCWIRE_BAD_VIEW_TYPE', 'unknown ArrayBufferView type index');
    const element = bytesPerElement(index);
    if (byteLength % element !== 0) {
      this._fail('ERR_PROCWIRE_BAD_VIEW_LENGTH', 'ArrayBufferView byte length is not a multiple of its element size');
    }
    let at;
    try {
      at = this._readRawBytes(byteLength);
    } catch {
      this._fail('ERR_PROCWIRE_DECODE', 'ArrayBufferView bytes run past the end of the payload');
    }
    const offset = this._base + at;
    // Aligned views borrow the input memory, as Node's do; others copy.
    if (!this._copyViews && byteLength > 0 && offset % element === 0) {
      return makeView(index, this._ab, offset, byteLength);
    }
    const copy = new ArrayBuffer(byteLength);
    if (byteLength > 0) Uint8ArraySet.call(new Uint8Array(copy), new Uint8Array(this._ab, offset, byteLength));
    return makeView(index, copy, 0, byteLength);
  }
}

function makeView(index, ab, offset, byteLength) {
  if (index === BUFFER_INDEX) return state.Buffer.from(ab, offset, byteLength);
  if (index === 9) return new DataView(ab, offset, byteLength);
  const Ctor = CTOR_BY_INDEX[index];
  return new Ctor(ab, offset, byteLength / bytesPerElement(index));
}

// The largest maxByteLength a resizable ArrayBuffer may declare when the
// caller gives no limit: the default maxMessageSize.
const DEFAULT_MAX_BUFFER = 256 * 1024 * 1024;

function decodeAdvanced(view, copyViews, maxBuffer = DEFAULT_MAX_BUFFER) {
  const [ab, base, length] = viewParts(view);
  // V8 reserves a resizable ArrayBuffer's maxByteLength before anything
  // could check it; payloads holding the '~' tag byte are walked first.
  const bytes = new Uint8Array(ab, base, length);
  if (bytes.includes(TILDE)) {
    const scan = scanForOversizedBuffers(bytes, maxBuffer);
    if (scan === 'too-large') {
      throw coded('ERR_PROCWIRE_DECODE', 'a resizable ArrayBuffer\'s maxByteLength exceeds maxMessageSize');
    }
    if (scan === 'inconclusive') {
      throw coded('ERR_PROCWIRE_DECODE', 'payload could not be decoded (malformed around a resizable ArrayBuffer tag)');
    }
  }
  const value = fast.decode(view, copyViews === true);
  if (value !== fast.NOT_FAST) return value;
  let des = null;
  try {
    des = new Decoder(view, ab, base, copyViews === true);
    des.readHeader();
    return des.readValue();
  } catch (err) {
    if (des !== null && des._failure !== null) throw des._failure;
    // What V8 threw becomes the `cause` of a generic decode error.
    throw coded('ERR_PROCWIRE_DECODE', 'payload could not be decoded', err);
  }
}

function decodeJson(view) {
  try {
    let text;
    if (typedArrayTag.call(view) === 'Uint8Array') {
      // A Buffer or any Uint8Array: its bytes as UTF-8, as toString('utf8')
      // reads them, without a Buffer made over its memory first.
      text = utf8Slice.call(view, 0, typedArrayByteLength.call(view));
    } else {
      const [ab, offset, length] = viewParts(view);
      text = bufferToString.call(state.Buffer.from(ab, offset, length), 'utf8');
    }
    return JSONParse(text);
  } catch (err) {
    throw coded('ERR_PROCWIRE_DECODE', 'payload could not be decoded', err);
  }
}

function encode(format, value) {
  return format === FORMATS.json.id ? encodeJson(value) : encodeAdvanced(value);
}

function decode(format, view, copyViews, maxBuffer) {
  return format === FORMATS.json.id ? decodeJson(view) : decodeAdvanced(view, copyViews, maxBuffer);
}

function setup(Buffer, makeError) {
  state.Buffer = Buffer;
  state.makeError = makeError;
}

module.exports = { setup, encode, decode, encodeJson, decodeJson, state };
