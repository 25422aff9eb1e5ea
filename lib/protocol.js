'use strict';
// The wire protocol's names and numbers, defined once (docs/protocol.md
// describes each). src/core/protocol.h holds the C++ side's copy of the
// numbers both layers use; test/protocol.test.js checks that they agree.

// Internal messages: objects whose `cmd` starts with NODE_, which Node routes
// to 'internalMessage' and never to 'message'.
const INTERNAL_PREFIX = 'NODE_';
const CMD = Object.freeze({
  CAPABILITIES: 'NODE_PROCWIRE_CAPS',
  SEGMENT_ACK: 'NODE_PROCWIRE_SEGACK',
  // Recycled segments: the receiver hands ids back (SEGRET); the sender
  // tells it to unmap ids it dropped (SEGDROP).
  SEGMENT_RETURN: 'NODE_PROCWIRE_SEGRET',
  SEGMENT_DROP: 'NODE_PROCWIRE_SEGDROP',
  REQUEST: 'NODE_PROCWIRE_REQ',
  RESPONSE: 'NODE_PROCWIRE_RES',
  HELLO: 'NODE_PROCWIRE_HELLO',
  AUTH: 'NODE_PROCWIRE_AUTH',
  AUTH_FAIL: 'NODE_PROCWIRE_AUTH_FAIL',
  // Node's own handle-passing protocol, carried unchanged.
  HANDLE: 'NODE_HANDLE',
  HANDLE_ACK: 'NODE_HANDLE_ACK',
  HANDLE_NACK: 'NODE_HANDLE_NACK',
});

// Version of the NODE_PROCWIRE_CAPS message.
const CAPABILITIES_VERSION = 1;

// The `rings` value of NODE_PROCWIRE_CAPS: the version of the ring set-up
// frame (src/core/protocol.h, kRingSetupVersion). Ends whose versions differ
// do not start rings and stay on the socket. Version 2: each end's set-up
// carries the wake-up link of the ring it reads, made by the reader.
const RINGS_VERSION = 2;

// Node's host-object tags in `advanced` payloads, and procwire's extension.
const HOST_TAG = Object.freeze({ VIEW: 0, OTHER: 1, SEGMENT_VIEW: 2 });

// Node's ArrayBufferView type indexes (lib/v8.js): the constructor for each,
// its element size, and the index for a constructor name. 10 is Node's
// Buffer; 13 is Float16Array where the runtime has it (null otherwise).
const Float16 = typeof globalThis.Float16Array === 'function' ? globalThis.Float16Array : null;
const VIEW_INDEX = Object.freeze({ BUFFER: 10, FLOAT16: 13 });
const VIEW_CTOR_BY_INDEX = Object.freeze([Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array,
  Int32Array, Uint32Array, Float32Array, Float64Array, DataView, null, BigInt64Array, BigUint64Array, Float16]);
const VIEW_ELEMENT_SIZE = Object.freeze([1, 1, 1, 2, 2, 4, 4, 4, 8, 1, 1, 8, 8, 2]);
const VIEW_INDEX_BY_NAME = { __proto__: null };
VIEW_CTOR_BY_INDEX.forEach((Ctor, index) => {
  if (Ctor !== null && Ctor !== DataView) VIEW_INDEX_BY_NAME[Ctor.name] = index;
});
Object.freeze(VIEW_INDEX_BY_NAME);

// First payload byte of the control frame [0xFE][n] announcing the next
// frame's n shared-memory segments (a V8 payload always starts with 0xFF).
const SEGMENTS_CONTROL_BYTE = 0xfe;
const MAX_SEGMENTS_PER_FRAME = 64;
// First payload byte of the control frame [0xFC][n] + n × [kind][u32 id][u32
// length] announcing the next frame's segments when some are recycled, and
// the entry kinds (docs/protocol.md).
const POOLED_SEGMENTS_CONTROL_BYTE = 0xfc;
const SEGMENT_ENTRY_SIZE = 9;
const SEGMENT_KIND = Object.freeze({ SEALED: 0, POOLED_NEW: 1, POOLED: 2 });

// Largest message by default, on every path (inline, segments, transfer).
const DEFAULT_MAX_MESSAGE_SIZE = 256 * 1024 * 1024;

// How long a peer has to complete its hello (the authentication handshake,
// or NATS's channel hello) by default, in ms.
const DEFAULT_HELLO_TIMEOUT = 5000;

// Header names of the NATS transport.
const NATS_CONTROL_HEADER = 'Procwire';
const NATS_ERROR_HEADER = 'Procwire-Error';

function isInternal(message) {
  return typeof message === 'object' && message !== null && typeof message.cmd === 'string' &&
    message.cmd.length > INTERNAL_PREFIX.length && message.cmd.startsWith(INTERNAL_PREFIX);
}

module.exports = {
  INTERNAL_PREFIX,
  CMD,
  CAPABILITIES_VERSION,
  RINGS_VERSION,
  HOST_TAG,
  VIEW_INDEX,
  VIEW_CTOR_BY_INDEX,
  VIEW_ELEMENT_SIZE,
  VIEW_INDEX_BY_NAME,
  SEGMENTS_CONTROL_BYTE,
  MAX_SEGMENTS_PER_FRAME,
  POOLED_SEGMENTS_CONTROL_BYTE,
  SEGMENT_ENTRY_SIZE,
  SEGMENT_KIND,
  DEFAULT_MAX_MESSAGE_SIZE,
  DEFAULT_HELLO_TIMEOUT,
  NATS_CONTROL_HEADER,
  NATS_ERROR_HEADER,
  isInternal,
};
