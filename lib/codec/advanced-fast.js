'use strict';
// The fast path of the `advanced` format: V8's ValueSerializer wire format
// (version 15, what Node 20, 22, 24 and 26 all write) read and written in
// plain JavaScript, for the shapes real messages have. Setting up a
// ValueSerializer and walking properties through V8's generic machinery
// costs microseconds per message; these loops cost a fraction of that.
//
//   encode(value[, maxView]) -> a Buffer holding one whole frame (u32 BE
//       length + payload) in this module's scratch memory, valid until the
//       next call; or null when the value holds something this path does not
//       write (Map, Set, RegExp, Error, boxed primitives, proxies, non-plain
//       prototypes, arrays with holes or that cannot grow, views of at least
//       maxView bytes, getters, ...): the caller then encodes it with
//       ValueSerializer, which writes exactly what Node writes. This path
//       runs no user code (no getter, no trap), so declining never hands
//       ValueSerializer a value changed halfway, and every getter runs
//       once, there.
//   encodeCopy(value[, maxView]) -> the same frame in a Buffer of its own,
//       or null; encodeToScratch(value[, maxView]) -> the frame's length at
//       the start of scratch(), or -1; encodeAppend(buffer, at, value[,
//       maxView]) -> the frame's length, written into buffer from `at`
//       (or, when spilled() says it outgrew buffer, at the start of
//       scratch()), or -1.
//   decode(view[, copyViews]) -> the value, or NOT_FAST when the payload
//       holds anything unusual (a tag this path does not read, a malformed
//       or hostile byte): the caller then decodes it with
//       ValueDeserializer, which decides what it means or which error it is.
//   decodeRange(bytes, start, length) -> as decode(), for the payload at
//       bytes[start, start + length) of a Buffer.
//
// What V8 writes follows its internal representation in places no public
// API shows: an integral number stored as a double (a field that once held
// 1.5, an array that holds doubles) is written as a double; an array whose
// elements kind is holey or frozen is written sparse even when it has no
// holes; a string stored two bytes wide is written two-byte even when all
// its characters fit in one. This path writes what V8 writes for values
// built the ordinary way (Smi for every int32, dense for every array
// without holes, one-byte for every string that fits): the bytes are
// Node's for those, and a value that differs only in representation
// decodes to the same value on any receiver.

// The module's mutable state (the buffer being written, the payload being
// read, positions, ids) is declared with `var`. Every read of a module-level
// `let` from these functions checks that it has been initialized (its
// temporal dead zone), and TurboFan keeps those checks: with `var` the 64 B
// message of bench/codec.js encoded and decoded in about 320 ns instead of
// 395 ns on Node 20.
/* eslint-disable no-var */

const { Buffer } = require('buffer');
const { isProxy, isDate } = require('util').types;
const {
  typedArrayTag, typedArrayBuffer, typedArrayByteOffset, typedArrayByteLength,
  dataViewBuffer, dataViewByteOffset, dataViewByteLength, isDataView, bufferSlice,
} = require('../fallback/views');
const { kSeparateElements } = require('./separate');

// Intrinsics, captured before user code can replace them.
const ObjectKeys = Object.keys;
const ObjectGetPrototypeOf = Object.getPrototypeOf;
const ObjectHasOwn = Object.hasOwn;
const ObjectDefineProperty = Object.defineProperty;
const ObjectGetOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
const lookupGetter = Object.prototype.__lookupGetter__;
const ObjectIsExtensible = Object.isExtensible;
const ObjectPrototype = Object.prototype;
const ArrayPrototype = Array.prototype;
const ArrayIsArray = Array.isArray;
const ArrayBufferIsView = ArrayBuffer.isView;
const DatePrototype = Date.prototype;
const DateGetTime = Date.prototype.getTime;
const MathCeil = Math.ceil;
const BigIntCtor = BigInt;
const bufferWrite = Buffer.prototype.write;
// Buffer's per-encoding methods skip write()'s and toString()'s argument
// parsing, which costs more than the copy for a short string. Every Node
// line this package supports has them; the generic methods stand in
// otherwise.
const latin1Write = typeof Buffer.prototype.latin1Write === 'function'
  ? Buffer.prototype.latin1Write
  : function latin1Write(s, offset, length) { return bufferWrite.call(this, s, offset, length, 'latin1'); };
// The decoder reads any Uint8Array, not only Buffers (bufferSlice).
const latin1Slice = bufferSlice('latin1Slice', 'latin1');
const ucs2Slice = bufferSlice('ucs2Slice', 'utf16le');
const bufferCopy = Buffer.prototype.copy;
const bufferWriteBigUInt64LE = Buffer.prototype.writeBigUInt64LE;
const bufferReadBigUInt64LE = Buffer.prototype.readBigUInt64LE;
const Uint8ArraySet = Uint8Array.prototype.set;
// A frame is made over the slab by the constructor Buffer#subarray makes
// its views with (Buffer[Symbol.species]): it skips Buffer.from's argument
// checks and its call into C++ (isAnyArrayBuffer), which cost more than the
// view. Checked once, and Buffer.from stands in if it does not make Buffers.
const makeFrameView = (() => {
  const Species = Buffer[Symbol.species];
  try {
    const probe = new Species(new ArrayBuffer(4), 1, 2);
    if (Buffer.isBuffer(probe) && probe.byteOffset === 1 && probe.length === 2) {
      return (arrayBuffer, offset, length) => new Species(arrayBuffer, offset, length);
    }
  } catch {}
  return (arrayBuffer, offset, length) => Buffer.from(arrayBuffer, offset, length);
})();
const Float16 = typeof globalThis.Float16Array === 'function' ? globalThis.Float16Array : null;

// V8's serialization tags (src/objects/value-serializer.cc).
const T_PADDING = 0x00;
const T_VERSION = 0xff;
const T_HOLE = 0x2d;          // '-'
const T_UNDEFINED = 0x5f;     // '_'
const T_NULL = 0x30;          // '0'
const T_TRUE = 0x54;          // 'T'
const T_FALSE = 0x46;         // 'F'
const T_INT32 = 0x49;         // 'I', zigzag varint
const T_UINT32 = 0x55;        // 'U', varint
const T_DOUBLE = 0x4e;        // 'N', 8 bytes little-endian
const T_BIGINT = 0x5a;        // 'Z', varint bitfield + digits
const T_ONE_BYTE = 0x22;      // '"', varint length + latin1
const T_TWO_BYTE = 0x63;      // 'c', varint byte length + UTF-16LE
const T_REF = 0x5e;           // '^', varint object id
const T_OBJECT = 0x6f;        // 'o'
const T_END_OBJECT = 0x7b;    // '{', varint property count
const T_DENSE = 0x41;         // 'A', varint length
const T_END_DENSE = 0x24;     // '$', varint property count, varint length
const T_SPARSE = 0x61;        // 'a', varint length
const T_END_SPARSE = 0x40;    // '@', varint property count, varint length
const T_DATE = 0x44;          // 'D', double
const T_HOST = 0x5c;          // '\\', Node's host object
const VERSION = 15;

// Node's host-object tags and view type indexes (lib/v8.js).
const { HOST_TAG, VIEW_INDEX, VIEW_CTOR_BY_INDEX: CTOR_BY_INDEX, VIEW_ELEMENT_SIZE: ELEMENT_SIZE,
  VIEW_INDEX_BY_NAME: INDEX_BY_NAME } = require('../protocol');
const VIEW_TAG = HOST_TAG.VIEW;
const OTHER_HOST_OBJECT_TAG = HOST_TAG.OTHER;
const BUFFER_INDEX = VIEW_INDEX.BUFFER;
const FLOAT16_INDEX = VIEW_INDEX.FLOAT16;

// Thrown inside the encoder to abandon a message to ValueSerializer.
const DECLINE = { declined: true };
// Returned by decode() (and thrown inside it) for ValueDeserializer's turn.
const NOT_FAST = { notFast: true };

// ---- encoder ---------------------------------------------------------------

// One growable scratch buffer, reused by every message: the only allocation
// per message is the copy the caller keeps (or the native queue's).
const INITIAL_SCRATCH = 16 * 1024;
const KEEP_SCRATCH = 1024 * 1024;
var scratchBuffer = Buffer.allocUnsafeSlow(INITIAL_SCRATCH);
// encodeCopy writes its frames straight into a slab, one after another, as
// Buffer.allocUnsafe does into Node's pool: the frame the caller keeps is a
// view of the slab, made without a copy and without a temporary view. A
// slab is never written again where a frame was handed out.
const SLAB_SIZE = 16 * 1024;
// Frames from this size on get exact memory of their own instead (so a
// kept frame does not pin a mostly empty slab), and a slab with less room
// left than this is replaced before the next frame.
const SLAB_FRAME_MAX = 2 * 1024;
var slab = null;
// The slab's ArrayBuffer, which frames are made over (makeFrameView):
// slab.subarray() would ask V8's C++ for it for every frame.
var slabArrayBuffer = null;
var slabPos = 0;
// The buffer being written, where the frame in it starts, the next byte.
var out = scratchBuffer;
var start = 0;
var pos = 0;
// Object ids, as V8 assigns them: every object, array, date and view, in
// the order first met; a second meeting writes a back-reference. Only ids
// from idFloor on can be referred back to (below). The first few of those
// are found by a linear scan (putting an object in a Map makes V8 give it
// an identity hash, which costs more than the scan): id idFloor + i is at
// firstObjects[i]; past that, a Map.
const LINEAR_IDS = 24;
const firstObjects = new Array(LINEAR_IDS).fill(null);
var ids = new Map();
var idsUsed = false;
var nextId = 0;

// Objects given ids below this are not referred back to: the message is a
// marked array (./separate.js), and they belong to an earlier group of it.
// Met again, such an object is written afresh under a new id, as V8 writes a
// distinct object. So each group of a batch starts with an empty scan list
// and no Map, however many objects the batch holds.
var idFloor = 0;
// The value being encoded: only the message itself can be marked.
var topLevel = null;

function idOf(o) {
  const seen = nextId - idFloor;
  const n = seen < LINEAR_IDS ? seen : LINEAR_IDS;
  for (let i = 0; i < n; i++) if (firstObjects[i] === o) return idFloor + i;
  return seen > LINEAR_IDS ? ids.get(o) : undefined;
}

function newId(o) {
  const id = nextId++;
  if (id - idFloor < LINEAR_IDS) {
    firstObjects[id - idFloor] = o;
  } else {
    ids.set(o, id);
    idsUsed = true;
  }
}

// No object met so far is referred back to from here on. A used Map is
// replaced, not cleared: V8 links a cleared Map's old table to its new one,
// so one old table that reached the old generation would keep every later
// table, and the objects of every message in them, alive through each
// young-generation scavenge until a full collection.
function forgetIds() {
  const seen = nextId - idFloor;
  const n = seen < LINEAR_IDS ? seen : LINEAR_IDS;
  for (let i = 0; i < n; i++) firstObjects[i] = null;
  if (idsUsed) {
    ids = new Map();
    idsUsed = false;
  }
  idFloor = nextId;
}
var encoding = false;
var maxViewBytes = Infinity;
const scratchDouble = new Float64Array(1);
const scratchDoubleBytes = new Uint8Array(scratchDouble.buffer);

// The native binding's string writer (see writeString), when there is a
// binding, and the last Buffer written into with the memory under it: a
// channel writes many frames into one Buffer, and looking its memory up is a
// call into V8.
var nativeWriteString = null;
// The native binding's string maker (see oneByteString), when there is one.
var nativeReadOneByte = null;
var targetView = null;
var targetMemory = null;
var targetOffset = 0;
const NATIVE_NO_ROOM = -2;

function retarget() {
  targetView = out;
  targetMemory = typedArrayBuffer.call(out);
  targetOffset = typedArrayByteOffset.call(out);
}

// The native writer's answer for `s` at `pos` of `out` (see writeString).
function writeStringNatively(s) {
  if (out !== targetView) retarget();
  return nativeWriteString(s, targetMemory, targetOffset + start, targetOffset + pos);
}

function configure(options) {
  if (typeof options.writeString === 'function') nativeWriteString = options.writeString;
  if (typeof options.readOneByteString === 'function') nativeReadOneByte = options.readOneByteString;
}

// Moves the frame written so far (from `start`) to the start of the
// scratch buffer, grown if need be (a frame that outgrows the slab
// continues there, and encodeCopy copies it out).
function grow(need) {
  const used = pos - start;
  let target = scratchBuffer;
  if (target === out || target.length < used + need) {
    let size = (out.length > target.length ? out.length : target.length) * 2;
    while (size < used + need) size *= 2;
    target = Buffer.allocUnsafeSlow(size);
    scratchBuffer = target;
  }
  if (used > 0) bufferCopy.call(out, target, 0, start, pos);
  // The string writer looks the memory up again for the new buffer, and
  // does not keep a replaced scratch buffer alive meanwhile.
  targetView = null;
  targetMemory = null;
  out = target;
  pos = used;
  start = 0;
}

function writeVarint(v) {
  while (v >= 0x80) {
    out[pos++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  out[pos++] = v;
}

function varintSize(v) {
  let n = 1;
  while (v >= 0x80) { v >>>= 7; n++; }
  return n;
}

function writeDouble(v) {
  scratchDouble[0] = v;
  const b = scratchDoubleBytes;
  out[pos] = b[0]; out[pos + 1] = b[1]; out[pos + 2] = b[2]; out[pos + 3] = b[3];
  out[pos + 4] = b[4]; out[pos + 5] = b[5]; out[pos + 6] = b[6]; out[pos + 7] = b[7];
  pos += 8;
}

function writeNumber(v) {
  if (pos + 11 > out.length) grow(11);
  // Every int32 is a Smi in Node's 64-bit builds; -0 is not.
  if ((v | 0) === v && (v !== 0 || 1 / v > 0)) {
    out[pos++] = T_INT32;
    writeVarint(((v << 1) ^ (v >> 31)) >>> 0);
  } else {
    out[pos++] = T_DOUBLE;
    writeDouble(v);
  }
}

// Whether a string has a character above U+00FF (then V8 stores it two
// bytes wide). V8 compiles this class to an immediate failure for strings
// stored one byte wide, so only two-byte strings are scanned.
const WIDE = /[\u0100-\uffff]/;
const SHORT_STRING = 16;
// Strings from this length on are decoded by V8 (see readOneByte).
const LONG_STRING = 4096;

function writeString(s) {
  const len = s.length;
  // Short strings are copied by hand; longer ones by one native write.
  if (len <= SHORT_STRING) {
    if (pos + 6 + len > out.length) grow(6 + len);
    const start = pos;
    out[pos++] = T_ONE_BYTE;
    out[pos++] = len;
    for (let i = 0; i < len; i++) {
      const c = s.charCodeAt(i);
      if (c > 0xff) {
        pos = start;
        writeTwoByte(s);
        return;
      }
      out[pos++] = c;
    }
    return;
  }
  if (pos + 6 + len > out.length) grow(6 + len);
  if (nativeWriteString !== null) {
    // One native call asks V8 how it stores the string (what ValueSerializer
    // goes by), writes V8's header for it and copies the characters.
    let next = writeStringNatively(s);
    if (next === NATIVE_NO_ROOM) {
      // Two bytes a character, and maybe a padding byte.
      grow(7 + 2 * len);
      next = writeStringNatively(s);
    }
    if (next >= 0) {
      pos = next - targetOffset;
      return;
    }
  }
  if (WIDE.test(s)) {
    writeTwoByte(s);
    return;
  }
  out[pos++] = T_ONE_BYTE;
  writeVarint(len);
  pos += latin1Write.call(out, s, pos, len);
}

function writeTwoByte(s) {
  const bytes = s.length * 2;
  if (pos + 7 + bytes > out.length) grow(7 + bytes);
  // V8 aligns the characters to an even offset of its buffer, which starts
  // at the frame (Node writes the length placeholder first).
  if ((pos - start + 1 + varintSize(bytes)) & 1) out[pos++] = T_PADDING;
  out[pos++] = T_TWO_BYTE;
  writeVarint(bytes);
  pos += bufferWrite.call(out, s, pos, bytes, 'utf16le');
}

// ---- key tries (encoder and decoder) ----------------------------------------

// Messages of one kind repeat their key sequence. A trie keyed by key
// strings holds the sequences met (one trie for writing, one for reading),
// and each node remembers the child it led to last (`hotChild`): the next
// key is first compared with that child's key (the encoder: the same string,
// mostly the same interned string; the decoder: the same bytes), and a hit
// costs no hash and no Map lookup, only a copy or a compare of `keyBytes`,
// the key as a payload holds it (tag, length, characters), or null for a key
// that is not written so (an array index, a key over 127 characters or with
// a character above U+00FF). The decoder's nodes also hold its templates
// (see readObject). Each trie is bounded, so endless new keys (an object
// used as a dictionary, a hostile peer) cost bounded memory, and the
// encoder's keys cannot use up the decoder's room. Keys past the first
// TRIE_MAX_DEPTH of an object are not followed.
const TRIE_MAX_NODES = 8192;
const TRIE_MAX_DEPTH = 32;
// Longer keys take more than one byte for their length, and are not kept.
const KEY_BYTES_MAX_LENGTH = 127;

function newTrie() {
  return { root: newTrieNode(null), nodes: 0 };
}

function newTrieNode(key) {
  return { next: null, make: null, hits: 0, hotChild: null, key, keyBytes: keyBytesOf(key) };
}

function keyBytesOf(key) {
  if (key === null || key.length > KEY_BYTES_MAX_LENGTH || arrayIndexOf(key) >= 0) return null;
  const len = key.length;
  const bytes = new Uint8Array(2 + len);
  bytes[0] = T_ONE_BYTE;
  bytes[1] = len;
  for (let i = 0; i < len; i++) {
    const c = key.charCodeAt(i);
    if (c > 0xff) return null;
    bytes[2 + i] = c;
  }
  return bytes;
}

// The child of `node` for `key` in `trie`, made if need be (null once the
// trie is full); it becomes the node's hot child.
function trieChild(trie, node, key) {
  const next = node.next;
  let child = next === null ? undefined : next.get(key);
  if (child === undefined) {
    if (trie.nodes >= TRIE_MAX_NODES) return null;
    trie.nodes++;
    child = newTrieNode(key);
    if (next === null) node.next = new Map([[key, child]]);
    else next.set(key, child);
  }
  node.hotChild = child;
  return child;
}

// Whether a property key is an array index (V8 keeps those as numbers, and
// writes them so): the index, or -1.
function arrayIndexOf(k) {
  const c = k.charCodeAt(0);
  if (c >= 0x30 && c <= 0x39 && k.length <= 10 && (c !== 0x30 || k.length === 1)) {
    let n = 0;
    let i = 0;
    for (; i < k.length; i++) {
      const d = k.charCodeAt(i) - 0x30;
      if (d < 0 || d > 9) break;
      n = n * 10 + d;
    }
    if (i === k.length && n <= 4294967294) return n;
  }
  return -1;
}

const writeTrie = newTrie();
const readTrie = newTrie();

// An object key: an array index is written as a number (V8 keeps index keys
// as numbers), anything else as a string.
function writeKey(k) {
  const index = arrayIndexOf(k);
  if (index >= 0) writeNumber(index);
  else writeString(k);
}

// A key as keyBytesOf wrote it.
function writeKeyBytes(bytes) {
  const len = bytes.length;
  if (pos + len > out.length) grow(len);
  for (let i = 0; i < len; i++) out[pos + i] = bytes[i];
  pos += len;
}

const TWO_64 = 1n << 64n;
const MASK_64 = TWO_64 - 1n;

function writeBigInt(v) {
  const negative = v < 0n;
  let m = negative ? -v : v;
  if (pos + 6 > out.length) grow(6);
  out[pos++] = T_BIGINT;
  if (m === 0n) {
    out[pos++] = 0;
    return;
  }
  // V8 keeps 64-bit digits without leading zero digits and writes their
  // byte count (shifted past the sign bit), then the digits little-endian.
  const digits = m < TWO_64 ? 1 : MathCeil(m.toString(16).length / 16);
  writeVarint((digits * 16 + (negative ? 1 : 0)) >>> 0);
  if (pos + digits * 8 > out.length) grow(digits * 8);
  for (let i = 0; i < digits; i++) {
    bufferWriteBigUInt64LE.call(out, m & MASK_64, pos);
    pos += 8;
    m >>= 64n;
  }
}

function writeValue(v) {
  // typeof compared with a literal compiles to a check of the value; a
  // switch on typeof asks a builtin for the type's name first (about 20 ns
  // of a 64 B message).
  if (typeof v === 'string') {
    writeString(v);
  } else if (typeof v === 'number') {
    writeNumber(v);
  } else if (typeof v === 'object') {
    if (v === null) {
      if (pos + 1 > out.length) grow(1);
      out[pos++] = T_NULL;
      return;
    }
    writeObject(v);
  } else if (typeof v === 'boolean') {
    if (pos + 1 > out.length) grow(1);
    out[pos++] = v ? T_TRUE : T_FALSE;
  } else if (typeof v === 'undefined') {
    if (pos + 1 > out.length) grow(1);
    out[pos++] = T_UNDEFINED;
  } else if (typeof v === 'bigint') {
    writeBigInt(v);
  } else {
    // Functions and symbols: ValueSerializer's error, with its code.
    throw DECLINE;
  }
}

function writeObject(o) {
  const id = idOf(o);
  if (id !== undefined) {
    if (pos + 6 > out.length) grow(6);
    out[pos++] = T_REF;
    writeVarint(id);
    return;
  }
  // A proxy is refused by V8; its traps must not run here either.
  if (isProxy(o)) throw DECLINE;
  if (ArrayIsArray(o)) {
    writeArray(o);
    return;
  }
  if (ArrayBufferIsView(o)) {
    writeView(o);
    return;
  }
  const proto = ObjectGetPrototypeOf(o);
  if (proto === null || (proto === ObjectPrototype && plainPrototypeIsClean)) {
    writePlainObject(o);
    return;
  }
  if (proto === DatePrototype && isDate(o)) {
    newId(o);
    if (pos + 9 > out.length) grow(9);
    out[pos++] = T_DATE;
    writeDouble(DateGetTime.call(o));
    return;
  }
  throw DECLINE;
}

// Whether Object.prototype (which someone may have added to) has no
// enumerable property a for-in over a plain object would meet.
var plainPrototypeIsClean = true;
// The same for Array.prototype, looked at for the first array of a message:
// 0 not yet, 1 clean, 2 not.
var arrayPrototypeIsClean = 0;
function hasNoEnumerableKeys(o) {
  for (const k in o) return k === undefined;
  return true;
}

// The value of o's own property k, read without running user code: a
// getter (which may change the value being written, throw, or count its
// calls) declines the message before it runs, so that ValueSerializer runs
// it exactly once, in its own order, on a value nothing has touched yet.
// So does a missing property (an array's hole), whose read would go on to
// the prototype chain. A setter without a getter reads as undefined, as V8
// reads it.
function ownDataValue(o, k) {
  if (lookupGetter.call(o, k) !== undefined) throw DECLINE;
  const v = o[k];
  if (v === undefined && !ObjectHasOwn(o, k)) throw DECLINE;
  return v;
}

function writePlainObject(o) {
  newId(o);
  if (pos + 1 > out.length) grow(1);
  out[pos++] = T_OBJECT;
  let written = 0;
  // for-in visits the own enumerable string keys in Object.keys order (the
  // prototype, Object.prototype or null, has none enumerable: checked once
  // per message). No user code runs on this path (see ownDataValue), so the
  // keys cannot change while they are visited.
  let node = writeTrie.root;
  for (const k in o) {
    const v = ownDataValue(o, k);
    const hot = node === null ? null : node.hotChild;
    if (hot !== null && hot.key === k && hot.keyBytes !== null) {
      writeKeyBytes(hot.keyBytes);
      node = hot;
    } else {
      writeKey(k);
      // A key the trie could not copy is not kept in it either: a long key
      // would only hold memory.
      node = node === null || written >= TRIE_MAX_DEPTH || k.length > KEY_BYTES_MAX_LENGTH
        ? null : trieChild(writeTrie, node, k);
    }
    writeValue(v);
    written++;
  }
  if (pos + 6 > out.length) grow(6);
  out[pos++] = T_END_OBJECT;
  writeVarint(written);
}

// Arrays from this length on go to ValueSerializer, before any element is
// looked at. Each element here costs a check that it is no getter (a call
// into V8's C++ per element: see ownDataValue), which ValueSerializer
// does not pay for an array whose elements V8 keeps packed: from about a
// hundred elements on it encodes the array faster than this loop (1,000
// numbers: about x2.5 on Node 20; arrays of objects break even sooner).
const LONG_ARRAY = 128;

function writeArray(a) {
  // V8 writes an array sparse when its elements are holey, frozen, sealed
  // or not extensible; those go to ValueSerializer.
  if (!ObjectIsExtensible(a)) throw DECLINE;
  // A hole reads through the prototype chain: only Array.prototype's (with
  // nothing enumerable on it or Object.prototype, checked once per message)
  // is known to give undefined there without running user code.
  if (ObjectGetPrototypeOf(a) !== ArrayPrototype) throw DECLINE;
  if (arrayPrototypeIsClean === 0) arrayPrototypeIsClean = hasNoEnumerableKeys(ArrayPrototype) ? 1 : 2;
  if (arrayPrototypeIsClean !== 1) throw DECLINE;
  const length = a.length;
  if (length >= LONG_ARRAY) throw DECLINE;
  // A marked message starts a new group every `stride` elements from its
  // second; any other array never reaches its `nextGroup`.
  let stride = 0;
  let nextGroup = length;
  if (a === topLevel) {
    const marked = a[kSeparateElements];
    if (marked !== undefined) {
      stride = marked;
      nextGroup = 1;
    }
  }
  // A marked message is lib's own array, built by a literal and push and
  // never handed to user code: its only string keys are indexes, and an
  // index it holds is a data property (only defineProperty on it could
  // make a getter). It can still have a hole, where push met a setter on
  // Array.prototype or Object.prototype; Object.hasOwn finds that, per
  // element, for much less than Object.keys and __lookupGetter__ cost.
  const ours = stride !== 0;
  let extra = null;
  if (!ours) {
    // Object.keys lists the enumerable indexes ascending, then the other
    // keys: a hole or a non-enumerable element (V8 writes either array
    // sparse) leaves fewer than `length` indexes, so the key at length - 1
    // is not that index.
    const keys = ObjectKeys(a);
    if (length > 0 && (keys.length < length || arrayIndexOf(keys[length - 1]) !== length - 1)) throw DECLINE;
    if (keys.length > length) extra = keys.slice(length);
  }
  newId(a);
  if (pos + 6 > out.length) grow(6);
  out[pos++] = T_DENSE;
  writeVarint(length);
  const elements = pos;
  // An array of numbers only, one of them not a Smi, is stored (and
  // written) as doubles throughout when built by a literal, push, map,
  // JSON.parse, ...; one with anything else keeps its Smis.
  let numbers = 0;
  let doubles = 0;
  for (let i = 0; i < length; i++) {
    // An element getter declines before it runs (V8 writes such an array
    // sparse, and runs the getter there).
    if (ours ? !ObjectHasOwn(a, i) : lookupGetter.call(a, i) !== undefined) throw DECLINE;
    if (i === nextGroup) {
      forgetIds();
      nextGroup += stride;
    }
    const v = a[i];
    if (typeof v === 'number') {
      numbers++;
      if ((v | 0) !== v || (v === 0 && 1 / v < 0)) doubles++;
    }
    writeValue(v);
  }
  if (doubles > 0 && numbers === length && doubles < numbers) {
    pos = elements;
    if (pos + 9 * length > out.length) grow(9 * length);
    for (let i = 0; i < length; i++) {
      out[pos++] = T_DOUBLE;
      writeDouble(a[i]);
    }
  }
  let written = 0;
  if (extra !== null) {
    for (let i = 0; i < extra.length; i++) {
      const k = extra[i];
      const v = ownDataValue(a, k);
      writeString(k);
      writeValue(v);
      written++;
    }
  }
  if (pos + 11 > out.length) grow(11);
  out[pos++] = T_END_DENSE;
  writeVarint(written);
  writeVarint(length);
}

// view[key] as an ordinary read finds it, declined when that read would
// run a getter (or a proxy's trap) on the prototype chain.
function dataValueOf(o, key) {
  for (let at = o; at !== null; at = ObjectGetPrototypeOf(at)) {
    if (isProxy(at)) throw DECLINE;
    const d = ObjectGetOwnPropertyDescriptor(at, key);
    if (d !== undefined) {
      if (d.get !== undefined) throw DECLINE;
      return d.value;
    }
  }
  return undefined;
}

function viewIndex(view) {
  // Whether it is a Buffer follows an ordinary read of `constructor`
  // compared with the real Buffer, exactly as Node decides.
  if (dataValueOf(view, 'constructor') === Buffer) return BUFFER_INDEX;
  if (isDataView(view)) return 9;
  const name = typedArrayTag.call(view);
  const index = name === undefined ? undefined : INDEX_BY_NAME[name];
  if (index === undefined) throw DECLINE;
  return index;
}

function writeView(view) {
  newId(view);
  const index = viewIndex(view);
  let ab, offset, length;
  if (index === 9) {
    ab = dataViewBuffer.call(view);
    offset = dataViewByteOffset.call(view);
    length = dataViewByteLength.call(view);
  } else {
    ab = typedArrayBuffer.call(view);
    offset = typedArrayByteOffset.call(view);
    length = typedArrayByteLength.call(view);
  }
  // Large views may travel out of line on a procwire channel: the native
  // encoder decides those.
  if (length >= maxViewBytes) throw DECLINE;
  if (pos + 16 + length > out.length) grow(16 + length);
  out[pos++] = T_HOST;
  out[pos++] = VIEW_TAG;
  out[pos++] = index;
  writeVarint(length);
  // Only the view's own bytes: a view of a pooled Buffer must not leak the pool.
  if (length > 0) {
    Uint8ArraySet.call(out, new Uint8Array(ab, offset, length), pos);
    pos += length;
  }
}

// Writes value's frame into `buffer` from `at` (even); leaves it in `out`
// from `start` to `pos` and returns true, or returns false when declined.
function encodeInto(buffer, at, value, maxView) {
  encoding = true;
  plainPrototypeIsClean = hasNoEnumerableKeys(ObjectPrototype);
  arrayPrototypeIsClean = 0;
  out = buffer;
  start = at;
  pos = at + 4;
  nextId = 0;
  idFloor = 0;
  topLevel = value;
  maxViewBytes = maxView === undefined ? Infinity : maxView;
  let ok = false;
  try {
    if (pos + 2 > out.length) grow(2);
    out[pos++] = T_VERSION;
    out[pos++] = VERSION;
    writeValue(value);
    // No user code ran (see ownDataValue), so Object.prototype is as it was
    // checked above.
    ok = true;
  } catch (err) {
    if (err !== DECLINE && !(err instanceof RangeError)) throw cleanup(err);
  } finally {
    forgetIds();
    topLevel = null;
    encoding = false;
  }
  const payload = pos - start - 4;
  if (!ok || payload > 0xffffffff) return false;
  out[start] = payload >>> 24;
  out[start + 1] = (payload >>> 16) & 0xff;
  out[start + 2] = (payload >>> 8) & 0xff;
  out[start + 3] = payload & 0xff;
  return true;
}

// value -> the frame's length at the start of scratch(), or -1 when declined.
function encodeToScratch(value, maxView) {
  // A getter encoding another message while one is being encoded: declined,
  // leaving the encoder's state to the message in progress.
  if (encoding) return -1;
  const ok = encodeInto(scratchBuffer, 0, value, maxView);
  if (!ok) {
    shrink();
    return -1;
  }
  return pos;
}

// Appends value's frame to `buffer` at `at` -> the frame's length, or -1
// when declined. A frame that outgrew `buffer` is left at the start of
// scratch() instead, and spilled() then says so.
function encodeAppend(buffer, at, value, maxView) {
  if (encoding) return -1;  // as in encodeToScratch
  if (!encodeInto(buffer, at, value, maxView)) {
    shrink();
    return -1;
  }
  lastSpilled = out !== buffer;
  out = scratchBuffer;
  return pos - start;
}

// Whether the last encodeAppend left its frame in scratch().
var lastSpilled = false;
function spilled() {
  return lastSpilled;
}

// value -> frame in the scratch buffer (valid until the next call), or null.
function encode(value, maxView) {
  const length = encodeToScratch(value, maxView);
  return length < 0 ? null : scratchBuffer.subarray(0, length);
}

// value -> a Buffer of its own holding the frame, or null.
function encodeCopy(value, maxView) {
  if (encoding) return null;  // as in encodeToScratch
  // A slab that is full, or detached by someone who transferred a frame's
  // ArrayBuffer, is replaced.
  if (slab === null || slab.length - slabPos < SLAB_FRAME_MAX) {
    slab = Buffer.allocUnsafeSlow(SLAB_SIZE);
    slabArrayBuffer = slab.buffer;
    slabPos = 0;
  }
  const ok = encodeInto(slab, slabPos, value, maxView);
  if (!ok) return null;
  const length = pos - start;
  if (out === slab && length < SLAB_FRAME_MAX) {
    const frame = makeFrameView(slabArrayBuffer, start, pos - start);
    // The next frame starts 8-aligned, so a two-byte string's alignment
    // (which counts from the frame's start) and aligned views stay right.
    slabPos = (pos + 7) & ~7;
    return frame;
  }
  // A big frame: exact memory of its own. It was written into the slab's
  // free end (which the next frame overwrites) or into the scratch buffer.
  const copy = Buffer.allocUnsafe(length);
  Uint8ArraySet.call(copy, new Uint8Array(out.buffer, out.byteOffset + start, length));
  if (length > 65536) shrink();
  return copy;
}

// The scratch buffer the last encodeToScratch wrote its frame into.
function scratch() {
  return scratchBuffer;
}

function cleanup(err) {
  shrink();
  return err;
}

// After a very large message, the scratch memory goes back to its first size.
function shrink() {
  if (scratchBuffer.length > KEEP_SCRATCH) scratchBuffer = Buffer.allocUnsafeSlow(INITIAL_SCRATCH);
  out = scratchBuffer;
  // Nor does the string writer keep it.
  if (targetView !== null && targetView.length > KEEP_SCRATCH) {
    targetView = null;
    targetMemory = null;
  }
}

// ---- decoder ---------------------------------------------------------------

var u = null;     // the payload, as a Buffer
var p = 0;
var end = 0;
var ab = null;    // its ArrayBuffer (or null until looked up) and where u starts in it
var base = 0;
var copyAll = false;
// object id -> object (undefined while a host object is read,
// PENDING_OBJECT while a plain object's properties are read)
const objects = [];
const PENDING_OBJECT = { pending: true };
var objectCount = 0;
var decoding = false;
var bail = false;  // set by a reader that leaves the payload to V8

// Short one-byte strings (keys above all) come from a small cache, so a
// repeated key costs a hash and a compare, not an allocation.
const CACHE_SIZE = 1024;
const cache = new Array(CACHE_SIZE).fill('');

function addObject(o) {
  objects[objectCount++] = o;
}

function readVarint() {
  if (p >= end) throw NOT_FAST;
  let b = u[p++];
  if (b < 0x80) return b;
  let v = b & 0x7f;
  let shift = 7;
  for (;;) {
    if (p >= end) throw NOT_FAST;
    b = u[p++];
    if (shift === 28) {
      // The fifth byte: anything past 32 bits is V8's to judge.
      if (b > 0x0f) throw NOT_FAST;
      return (v + b * 0x10000000) >>> 0;
    }
    v |= (b & 0x7f) << shift;
    if (b < 0x80) return v >>> 0;
    shift += 7;
  }
}

function readDouble() {
  if (p + 8 > end) throw NOT_FAST;
  const b = scratchDoubleBytes;
  b[0] = u[p]; b[1] = u[p + 1]; b[2] = u[p + 2]; b[3] = u[p + 3];
  b[4] = u[p + 4]; b[5] = u[p + 5]; b[6] = u[p + 6]; b[7] = u[p + 7];
  p += 8;
  const v = scratchDouble[0];
  // V8 reads an integer that fits a Smi (not -0) as a Smi, and every NaN as
  // its one quiet NaN. A Smi kept as a double would be written back as one.
  if ((v | 0) === v) return v !== 0 || 1 / v > 0 ? v | 0 : v;
  return v === v ? v : NaN;
}

function readOneByte() {
  const len = readVarint();
  if (len > end - p) throw NOT_FAST;
  if (len <= 24) {
    let h = len;
    for (let i = 0; i < len; i++) h = (Math.imul(h, 31) + u[p + i]) | 0;
    const slot = h & (CACHE_SIZE - 1);
    const hit = cache[slot];
    if (hit.length === len) {
      let i = 0;
      while (i < len && hit.charCodeAt(i) === u[p + i]) i++;
      if (i === len) {
        p += len;
        return hit;
      }
    }
    const s = oneByteString(p, p + len);
    cache[slot] = s;
    p += len;
    return s;
  }
  // A long string is made faster by ValueDeserializer (one copy inside V8)
  // than through Buffer's decoder: the whole payload goes there. Without a
  // throw, which costs more than the rest of a small message: `bail` makes
  // every reader return at once.
  if (len >= LONG_STRING) {
    bail = true;
    return '';
  }
  const s = oneByteString(p, p + len);
  p += len;
  return s;
}

// The string of the Latin-1 bytes u[from, to): made by the native binding
// when there is one. Buffer#latin1Slice makes the same copy behind an
// environment lookup and two argument conversions; for the 64 B message of
// bench/codec.js its own call took about 25 ns more.
function oneByteString(from, to) {
  if (nativeReadOneByte !== null) {
    if (ab === null) {
      // Looked up once per message, as in readView.
      ab = typedArrayBuffer.call(u);
      base = typedArrayByteOffset.call(u);
    }
    if (base + to <= 0xffffffff) {
      const s = nativeReadOneByte(ab, base + from, base + to);
      // undefined: the memory was detached meanwhile.
      if (s === undefined) throw NOT_FAST;
      return s;
    }
  }
  return latin1Slice.call(u, from, to);
}

function readTwoByte() {
  const bytes = readVarint();
  if (bytes > end - p || (bytes & 1) !== 0) throw NOT_FAST;
  if (bytes >= LONG_STRING) {
    bail = true;
    return '';
  }
  const s = ucs2Slice.call(u, p, p + bytes);
  p += bytes;
  return s;
}

// The next tag, past any padding.
function peekTag() {
  while (p < end && u[p] === T_PADDING) p++;
  if (p >= end) throw NOT_FAST;
  return u[p];
}

function readValue() {
  const tag = peekTag();
  p++;
  switch (tag) {
    case T_ONE_BYTE: return readOneByte();
    case T_INT32: {
      const z = readVarint();
      return (z >>> 1) ^ -(z & 1);
    }
    case T_OBJECT: return readObject();
    case T_DENSE: return readDense();
    case T_REF: {
      const id = readVarint();
      const o = id < objectCount ? objects[id] : undefined;
      if (o === undefined) throw NOT_FAST;
      if (o === PENDING_OBJECT) {
        // A cycle: the object is made now and filled when its end is read.
        const early = {};
        objects[id] = early;
        return early;
      }
      return o;
    }
    case T_DOUBLE: return readDouble();
    case T_TRUE: return true;
    case T_FALSE: return false;
    case T_UNDEFINED: return undefined;
    case T_NULL: return null;
    case T_TWO_BYTE: return readTwoByte();
    case T_UINT32: return readVarint();
    case T_BIGINT: return readBigInt();
    case T_DATE: {
      const t = readDouble();
      const d = new Date(t);
      addObject(d);
      return d;
    }
    case T_SPARSE: return readSparse();
    case T_HOST: return readHost();
    default: throw NOT_FAST;
  }
}

// Reads key/value pairs into o up to endTag; returns how many were read.
function readProperties(o, endTag, isArray) {
  let n = 0;
  for (;;) {
    if (peekTag() === endTag) {
      p++;
      return n;
    }
    const k = readValue();
    if (bail) return n;
    if (typeof k !== 'string') {
      if (typeof k !== 'number') throw NOT_FAST;
    } else if (k === '__proto__' || (isArray && k === 'length')) {
      throw NOT_FAST;
    }
    const v = readValue();
    if (bail) return n;
    if (k in o) {
      // V8 refuses a key met twice; and it defines properties, so a setter
      // or a read-only property up the prototype chain changes nothing.
      if (ObjectHasOwn(o, k)) throw NOT_FAST;
      ObjectDefineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });
    } else {
      o[k] = v;
    }
    n++;
  }
}

// Plain objects are made by templates: a function per key sequence,
// holding one object literal (`{ "id": s[b], "method": s[b + 1] }`), found
// through a trie keyed by the (cached, so identical) key strings. Adding
// properties one by one to a fresh object costs a megamorphic keyed store
// and an `in` check per property; a literal makes the object with its final
// shape at once. A literal defines its properties, as ValueDeserializer
// does: no setter up the prototype chain runs. A template is made the second
// time a key sequence is met, only for distinct keys that are not
// `__proto__` (which a literal would treat as the prototype); everything
// else takes the property-by-property path. The trie and the templates are
// bounded, so a peer sending endless new keys costs bounded memory.
const TEMPLATE_MAX = 1024;
var templatesMade = 0;
// Made false for good when the process forbids code generation from strings.
var templatesEnabled = true;

// Whether the payload at p holds `keyBytes` (a key as keyBytesOf writes
// it); if so, p moves past it. Comparing bytes with bytes is cheaper than
// with a string's characters, whose representation TurboFan checks on each.
function atKey(keyBytes) {
  const len = keyBytes.length;
  if (p + len > end) return false;
  for (let i = 0; i < len; i++) {
    if (u[p + i] !== keyBytes[i]) return false;
  }
  p += len;
  return true;
}

// The keys and values of the objects being read, nested objects above their
// parent's (each readObject owns the part from its base).
const keyStack = [];
const valueStack = [];
var sp = 0;
var spHigh = 0;

function makeTemplate(node, base, n) {
  node.make = false;  // unless made below
  if (!templatesEnabled || templatesMade >= TEMPLATE_MAX) return;
  const seen = new Set();
  let body = 'return {';
  for (let i = 0; i < n; i++) {
    const k = keyStack[base + i];
    if (typeof k !== 'string' || k === '__proto__' || seen.has(k)) return;
    seen.add(k);
    // JSON's string syntax is valid JavaScript string syntax (ES2019).
    body += `${i > 0 ? ', ' : ''}${JSON.stringify(k)}: s[b + ${i}]`;
  }
  body += ' };';
  try {
    node.make = new Function('s', 'b', body);
    templatesMade++;
  } catch {
    templatesEnabled = false;
  }
}

function readObject() {
  const id = objectCount;
  // Made at the end, unless a back-reference from inside it (a cycle)
  // needs it earlier (see readValue).
  addObject(PENDING_OBJECT);
  const base = sp;
  let node = readTrie.root;
  let n = 0;
  for (;;) {
    if (peekTag() === T_END_OBJECT) {
      p++;
      break;
    }
    let k;
    const hot = node === null ? null : node.hotChild;
    if (hot !== null && hot.keyBytes !== null && atKey(hot.keyBytes)) {
      // The key that followed last time (never __proto__: see trieChild's
      // caller below).
      k = hot.key;
      node = hot;
    } else {
      k = readValue();
      if (bail) return null;
      if (typeof k !== 'string') {
        if (typeof k !== 'number') throw NOT_FAST;
        node = null;
      } else if (k === '__proto__') {
        throw NOT_FAST;
      } else if (node !== null) {
        node = n < TRIE_MAX_DEPTH ? trieChild(readTrie, node, k) : null;
      }
    }
    const v = readValue();
    if (bail) return null;
    keyStack[sp] = k;
    valueStack[sp] = v;
    sp++;
    n++;
  }
  if (sp > spHigh) spHigh = sp;
  if (readVarint() !== n) throw NOT_FAST;
  let o = objects[id];
  if (o === PENDING_OBJECT && node !== null && typeof node.make === 'function') {
    o = node.make(valueStack, base);
  } else {
    if (o === PENDING_OBJECT) o = {};
    for (let i = base; i < sp; i++) {
      const k = keyStack[i];
      const v = valueStack[i];
      if (k in o) {
        // V8 refuses a key met twice; and it defines properties, so a
        // setter or a read-only property up the prototype chain changes
        // nothing.
        if (ObjectHasOwn(o, k)) throw NOT_FAST;
        ObjectDefineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });
      } else {
        o[k] = v;
      }
    }
    if (node !== null && node.make === null && ++node.hits >= 2) makeTemplate(node, base, n);
  }
  sp = base;
  // Object 0 is the payload's outermost value: nothing after it can refer
  // to it, and not keeping it saves a write barrier per message.
  if (id !== 0) objects[id] = o;
  return o;
}

function readDense() {
  const length = readVarint();
  // Every element takes at least one byte.
  if (length > end - p) throw NOT_FAST;
  // Holey generic elements, as ValueDeserializer makes them, so the array
  // behaves the same afterwards (V8 serializes it again the same way).
  const a = new Array(length);
  if (length > 0) a[0] = undefined;
  addObject(a);
  for (let i = 0; i < length; i++) {
    const tag = peekTag();
    if (tag === T_INT32) {
      // Arrays of small integers are common: no trip through readValue.
      p++;
      const z = readVarint();
      a[i] = (z >>> 1) ^ -(z & 1);
      continue;
    }
    if (tag === T_DOUBLE) {
      // So are arrays of doubles.
      p++;
      a[i] = readDouble();
      continue;
    }
    if (tag === T_HOLE) {
      p++;
      if (i === 0) delete a[0];
      continue;
    }
    a[i] = readValue();
    if (bail) return a;
  }
  const n = readProperties(a, T_END_DENSE, true);
  if (bail) return a;
  if (readVarint() !== n || readVarint() !== length) throw NOT_FAST;
  return a;
}

function readSparse() {
  const length = readVarint();
  const a = [];
  a.length = length;
  addObject(a);
  const n = readProperties(a, T_END_SPARSE, true);
  if (bail) return a;
  if (readVarint() !== n || readVarint() !== length) throw NOT_FAST;
  return a;
}

const HEX = [];
for (let i = 0; i < 256; i++) HEX.push((i < 16 ? '0' : '') + i.toString(16));

function readBigInt() {
  const bitfield = readVarint();
  const bytes = (bitfield >>> 1) & 0x3fffffff;
  if (bitfield > 0x7fffffff || bytes > 4096 || bytes > end - p) throw NOT_FAST;
  let m;
  if (bytes === 8) {
    m = bufferReadBigUInt64LE.call(u, p);
  } else {
    // Digits are little-endian: the hex text reads them from the top.
    let hex = '0x0';
    for (let i = bytes - 1; i >= 0; i--) hex += HEX[u[p + i]];
    m = BigIntCtor(hex);
  }
  // A zero with a sign or with digits is V8's to judge.
  if (m === 0n && bitfield !== 0) throw NOT_FAST;
  p += bytes;
  return (bitfield & 1) !== 0 ? -m : m;
}

function readHost() {
  const id = objectCount;
  addObject(undefined);
  const tag = readVarint();
  let value;
  if (tag === VIEW_TAG) {
    value = readView();
  } else if (tag === OTHER_HOST_OBJECT_TAG) {
    value = readValue();
    if (bail) return value;
    if (typeof value !== 'object' || value === null) throw NOT_FAST;
  } else {
    throw NOT_FAST;
  }
  objects[id] = value;
  return value;
}

function readView() {
  const index = readVarint();
  const byteLength = readVarint();
  if (index > 13 || (index === FLOAT16_INDEX && Float16 === null)) throw NOT_FAST;
  const element = ELEMENT_SIZE[index];
  if (byteLength % element !== 0 || byteLength > end - p) throw NOT_FAST;
  if (ab === null) {
    // The payload's memory, looked up once per message; an on-heap array
    // moves off the heap here, so the offset is read after.
    ab = typedArrayBuffer.call(u);
    base = typedArrayByteOffset.call(u);
  }
  const offset = base + p;
  p += byteLength;
  // Aligned views borrow the input memory, as Node's do; others copy.
  if (!copyAll && byteLength > 0 && offset % element === 0) return makeView(index, ab, offset, byteLength);
  const copy = new ArrayBuffer(byteLength);
  if (byteLength > 0) Uint8ArraySet.call(new Uint8Array(copy), new Uint8Array(ab, offset, byteLength));
  return makeView(index, copy, 0, byteLength);
}

function makeView(index, buffer, offset, byteLength) {
  if (index === BUFFER_INDEX) return Buffer.from(buffer, offset, byteLength);
  if (index === 9) return new DataView(buffer, offset, byteLength);
  const Ctor = CTOR_BY_INDEX[index];
  return new Ctor(buffer, offset, byteLength / ELEMENT_SIZE[index]);
}

// payload view -> value, or NOT_FAST. `copyViews` makes decoded views copy
// instead of borrowing the payload's memory.
function decode(view, copyViews) {
  if (decoding) return NOT_FAST;
  const tag = typedArrayTag.call(view);
  if (tag === 'Uint8Array') {
    // A Buffer or any other Uint8Array is read as it is (the readers call
    // Buffer's methods on it, never its own). Reading its `buffer` is a call
    // into V8's C++ (and may have to move an on-heap array's bytes): only a
    // view in the payload needs it, so readView gets it then. The tag getter
    // is also what tells a Buffer apart cheaply: Object.getPrototypeOf on a
    // Buffer is a call into the runtime.
    const length = typedArrayByteLength.call(view);
    if (length < 3) return NOT_FAST;
    return run(view, null, 0, 0, length, copyViews === true);
  }
  let buffer, offset, length;
  if (tag !== undefined) {
    buffer = typedArrayBuffer.call(view);
    offset = typedArrayByteOffset.call(view);
    length = typedArrayByteLength.call(view);
  } else {
    buffer = dataViewBuffer.call(view);
    offset = dataViewByteOffset.call(view);
    length = dataViewByteLength.call(view);
  }
  if (length < 3) return NOT_FAST;
  return run(Buffer.from(buffer, offset, length), buffer, offset, 0, length, copyViews === true);
}

// The last Buffer decodeRange read, its ArrayBuffer and where it starts in
// it: a channel decodes every batch from the same Buffer, and looking its
// memory up is a call into V8. (Keeps that one Buffer alive meanwhile.)
var rangeBytes = null;
var rangeMemory = null;
var rangeBase = 0;

// One payload of `length` bytes at `start` in the Buffer `bytes` -> the
// value, or NOT_FAST, as decode(). For a channel's batch of small frames,
// all in one Buffer: no view is made per message, and its memory is looked
// up once. Views in the payload borrow `bytes`' memory, as decode()'s do.
function decodeRange(bytes, start, length) {
  if (decoding || length < 3) return NOT_FAST;
  if (bytes !== rangeBytes) {
    // An on-heap array moves off the heap here, so the offset is read after.
    rangeMemory = typedArrayBuffer.call(bytes);
    rangeBase = typedArrayByteOffset.call(bytes);
    rangeBytes = bytes;
  }
  return run(bytes, rangeMemory, rangeBase, start, start + length, false);
}

// Reads the payload in u[start, stop). `buffer`/`offset`: u's memory, or
// null (looked up when a view needs it).
function run(bytes, buffer, offset, start, stop, copyViews) {
  u = bytes;
  if (u[start] !== T_VERSION || u[start + 1] !== VERSION) {
    u = null;
    return NOT_FAST;
  }
  ab = buffer;
  base = offset;
  end = stop;
  p = start + 2;
  copyAll = copyViews;
  decoding = true;
  bail = false;
  try {
    const value = readValue();
    return bail ? NOT_FAST : value;
  } catch (err) {
    // Anything unusual, a stack overflow included: ValueDeserializer decides.
    return NOT_FAST;
  } finally {
    decoding = false;
    u = null;
    ab = null;
    // Forget the decoded objects and values without shrinking the lists
    // (cheaper).
    for (let i = 0; i < objectCount; i++) objects[i] = undefined;
    objectCount = 0;
    const top = sp > spHigh ? sp : spHigh;
    for (let i = 0; i < top; i++) valueStack[i] = undefined;
    sp = 0;
    spHigh = 0;
  }
}

// How many nodes each key trie holds (for the tests of their bound).
function trieNodeCounts() {
  return { write: writeTrie.nodes, read: readTrie.nodes, max: TRIE_MAX_NODES };
}

module.exports = {
  encode, encodeCopy, encodeToScratch, encodeAppend, spilled, scratch, decode, decodeRange, configure, NOT_FAST,
  trieNodeCounts,
};
