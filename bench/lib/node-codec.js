'use strict';
// Node's own child_process wire formats rebuilt on require('v8'), the way
// Node's lib/internal/child_process/serialization.js builds them, so the
// benchmark's "built-in" rows and the tests' byte-for-byte reference are
// Node's path, independent of procwire's code:
//   advanced: a v8.DefaultSerializer whose host objects get a uint32 tag (0 for
//     ArrayBufferViews, followed by DefaultSerializer's view encoding; 1 for
//     any other host object, followed by a {...obj} copy), 4 placeholder bytes
//     that become the big-endian payload length, then the header and value;
//   json: JSON text and '\n', UTF-8.

const v8 = require('v8');
const { Buffer } = require('buffer');

const kArrayBufferViewTag = 0;
const kNotArrayBufferViewTag = 1;

class NodeIpcSerializer extends v8.DefaultSerializer {
  _writeHostObject(object) {
    if (ArrayBuffer.isView(object)) {
      this.writeUint32(kArrayBufferViewTag);
      return super._writeHostObject(object);
    }
    this.writeUint32(kNotArrayBufferViewTag);
    this.writeValue({ ...object });
  }
}

class NodeIpcDeserializer extends v8.DefaultDeserializer {
  _readHostObject() {
    const tag = this.readUint32();
    if (tag === kArrayBufferViewTag) return super._readHostObject();
    if (tag !== kNotArrayBufferViewTag) throw new TypeError(`unknown host object tag ${tag}`);
    return this.readValue();
  }
}

const LENGTH_PLACEHOLDER = new Uint8Array(4);

// value -> whole frame (u32 BE length + payload), as Node writes it.
function nodeAdvancedEncode(value) {
  const ser = new NodeIpcSerializer();
  ser.writeRawBytes(LENGTH_PLACEHOLDER);
  ser.writeHeader();
  ser.writeValue(value);
  const frame = ser.releaseBuffer();
  frame.writeUInt32BE(frame.length - 4, 0);
  return frame;
}

// payload (no length header) -> value, as Node reads it.
function nodeAdvancedDecode(payload) {
  const des = new NodeIpcDeserializer(payload);
  des.readHeader();
  return des.readValue();
}

function nodeJsonEncode(value) {
  return Buffer.from(`${JSON.stringify(value)}\n`, 'utf8');
}

// payload (without its '\n') -> value. A Buffer is read with its own
// toString(), Buffer's UTF-8 fast path (a view made over it first measured
// about 10% slower for the 64 B message); any other view through a Buffer
// over its memory.
function nodeJsonDecode(payload) {
  const text = Buffer.isBuffer(payload)
    ? payload.toString()
    : Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength).toString('utf8');
  return JSON.parse(text);
}

module.exports = { nodeAdvancedEncode, nodeAdvancedDecode, nodeJsonEncode, nodeJsonDecode };
