'use strict';
// The wire formats procwire speaks, as data: each format's name, the id the
// binding knows it by (WireFormat in src/core/frame_reader.h numbers them the same), and its
// framing. No code here, so every layer (the registry, the pure-JS
// fallback, the stream handle) can read it without an import cycle.
//
//   framing 'length': u32 big-endian payload length, then the payload
//   framing 'line':   the payload, then '\n'

const FORMATS = Object.freeze({
  advanced: Object.freeze({ name: 'advanced', id: 0, framing: 'length', headerBytes: 4, trailerBytes: 0 }),
  json: Object.freeze({ name: 'json', id: 1, framing: 'line', headerBytes: 0, trailerBytes: 1 }),
});

const BY_ID = Object.freeze(Object.values(FORMATS).reduce((out, f) => { out[f.id] = f; return out; }, []));

// format id -> its entry (advanced for anything unknown, as the binding does).
function formatById(id) {
  return BY_ID[id] || FORMATS.advanced;
}

// The bytes of a frame that are not payload.
function framingBytes(format) {
  return format.headerBytes + format.trailerBytes;
}

module.exports = { FORMATS, formatById, framingBytes };
