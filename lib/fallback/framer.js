'use strict';
// The pure-JavaScript NativeFramer: a byte stream pushed in arbitrary pieces
// in, decoded messages out, with the native framer's semantics:
//   advanced  u32 big-endian payload length (unsigned), then the payload;
//   json      the payload, then '\n'.
// A frame whose declared length (or a line that grows) past maxMessageSize is
// fatal: the stream cannot be framed any more. A frame that arrives whole but
// does not decode is reported as an error entry and the stream goes on.
//
// push(view[, sizes]) -> [messages, errors | undefined, fatal | undefined]
//   errors: flat (index, error) pairs; the bad frame came just before
//   messages[index]. `sizes`, when given, receives each frame's wire size
//   (header or terminator included), in order, for statistics.
// Frames wholly inside a pushed chunk are decoded in place (decoded views may
// borrow the chunk's memory, as with the native framer); reassembled frames
// are decoded with copies.

const codec = require('./codec');
const { FORMATS } = require('../codec/formats');

const JSON_ID = FORMATS.json.id;

const HEADER = 4;
const NEWLINE = 0x0a;

const {
  typedArrayBuffer, typedArrayByteOffset, typedArrayByteLength,
  dataViewBuffer, dataViewByteOffset, dataViewByteLength, isDataView,
} = require('./views');

function bytesOf(view) {
  if (isDataView(view)) {
    return new Uint8Array(dataViewBuffer.call(view), dataViewByteOffset.call(view), dataViewByteLength.call(view));
  }
  return new Uint8Array(typedArrayBuffer.call(view), typedArrayByteOffset.call(view), typedArrayByteLength.call(view));
}

class JsFramer {
  constructor(format, max, decode = codec.decode) {
    this._format = format === JSON_ID ? JSON_ID : FORMATS.advanced.id;
    this._max = max;
    this._decode = decode;
    // advanced: the header while incomplete, then the payload being filled.
    this._header = new Uint8Array(HEADER);
    this._headerHave = 0;
    this._payload = null;
    this._payloadLength = 0;
    this._payloadHave = 0;
    // json: pieces of the line so far.
    this._pieces = [];
    this._pendingLength = 0;
    this._failedDeclared = -1;
    // Under a provisional limit (a hello's), the bytes from an over-limit
    // frame's first byte on, kept for pushHeld(), and that frame's size.
    this._hold = false;
    this._held = null;
    this._heldDeclared = 0;
  }

  buffering() {
    const held = this._held === null ? 0 : this._held.length;
    if (this._format === JSON_ID) return held + this._pendingLength;
    return held + (this._payload === null ? this._headerHave : HEADER + this._payloadHave);
  }

  // True while push() stopped at a frame over a provisional limit: push()
  // takes nothing more until pushHeld() framed the held bytes again.
  held() {
    return this._held !== null;
  }

  // Frames the held bytes again under the limit now in force (the hello
  // that completed meanwhile raised it), with push()'s result; a frame still
  // over the limit fails the stream as push() would have.
  pushHeld(sizes) {
    const held = this._held;
    if (held === null) return [[], undefined, undefined];
    this._held = null;
    if (this._heldDeclared > this._max) {
      this._fail(this._heldDeclared);
      return [[], undefined, this._fatal(this._heldDeclared)];
    }
    return this.push(held, sizes);
  }

  // The largest payload accepted from now on, applied to a frame already
  // buffered too. false: that frame is over the new limit and the stream has
  // failed (push() reports the fatal error). A `provisional` limit (the
  // hello's) holds a later over-limit frame instead of failing (held()).
  setMaxMessageSize(max, provisional) {
    this._max = max;
    this._hold = provisional === true;
    if (this._failedDeclared >= 0) return false;
    if (this._format === JSON_ID) {
      if (this._pendingLength > max) this._fail(this._pendingLength);
    } else if (this._payload !== null && this._payloadLength > max) {
      this._fail(this._payloadLength);
    }
    return this._failedDeclared < 0;
  }

  // Room for `need` payload bytes in total, growing by doubling but never
  // past the declared length: memory follows the bytes that arrived, not
  // what the peer declared.
  _reserve(need) {
    const payload = this._payload;
    if (payload.length >= need) return;
    const grown = new Uint8Array(Math.min(this._payloadLength, Math.max(need, payload.length * 2, 64 * 1024)));
    grown.set(payload.subarray(0, this._payloadHave), 0);
    this._payload = grown;
  }

  _fatal(declared) {
    const { makeError } = codec.state;
    return makeError('ERR_PROCWIRE_MESSAGE_TOO_LARGE',
      `frame of ${declared} bytes exceeds maxMessageSize (${this._max} bytes)`);
  }

  _fail(declared) {
    this._failedDeclared = declared;
    this._header = null;
    this._payload = null;
    this._headerHave = 0;
    this._payloadHave = 0;
    this._pieces = [];
    this._pendingLength = 0;
  }

  // Over the limit: the stream fails, or, under a provisional limit, the
  // bytes from the frame's first byte on (`pending`, then `rest`) are kept
  // unparsed for pushHeld().
  _overLimit(declared, pending, rest) {
    if (!this._hold) {
      this._fail(declared);
      return;
    }
    const held = new Uint8Array(pending.length + rest.length);
    held.set(pending, 0);
    held.set(rest, pending.length);
    this._held = held;
    this._heldDeclared = declared;
    this._headerHave = 0;
    this._payload = null;
    this._payloadHave = 0;
    this._pieces = [];
    this._pendingLength = 0;
  }

  push(view, sizes) {
    const messages = [];
    let errors;
    const deliver = (payload, copy) => {
      if (sizes !== undefined) sizes.push(payload.length + (this._format === JSON_ID ? 1 : HEADER));
      try {
        messages.push(this._decode(this._format, payload, copy, this._max));
      } catch (err) {
        if (errors === undefined) errors = [];
        errors.push(messages.length, err);
      }
    };
    if (this._failedDeclared < 0 && this._held === null) {
      const bytes = bytesOf(view);
      if (this._format === JSON_ID) this._pushJson(bytes, deliver); else this._pushAdvanced(bytes, deliver);
    }
    const fatal = this._failedDeclared >= 0 ? this._fatal(this._failedDeclared) : undefined;
    return [messages, errors, fatal];
  }

  _pushAdvanced(bytes, deliver) {
    const size = bytes.length;
    const max = this._max;
    let pos = 0;
    if (this._headerHave > 0 || this._payload !== null) {
      if (this._payload === null) {
        const take = Math.min(HEADER - this._headerHave, size);
        this._header.set(bytes.subarray(0, take), this._headerHave);
        this._headerHave += take;
        pos = take;
        if (this._headerHave < HEADER) return;
        const h = this._header;
        const length = ((h[0] << 24) >>> 0) + (h[1] << 16) + (h[2] << 8) + h[3];
        if (length > max) {
          this._overLimit(length, this._header, bytes.subarray(pos));
          return;
        }
        this._payload = new Uint8Array(0);
        this._payloadLength = length;
        this._payloadHave = 0;
      }
      const take = Math.min(this._payloadLength - this._payloadHave, size - pos);
      this._reserve(this._payloadHave + take);
      const payload = this._payload;
      if (take > 0) payload.set(bytes.subarray(pos, pos + take), this._payloadHave);
      this._payloadHave += take;
      pos += take;
      if (this._payloadHave < this._payloadLength) return;
      this._payload = null;
      this._headerHave = 0;
      this._payloadHave = 0;
      deliver(payload, true);
    }
    while (pos < size) {
      if (size - pos < HEADER) {
        this._header.set(bytes.subarray(pos, size), 0);
        this._headerHave = size - pos;
        return;
      }
      const length = ((bytes[pos] << 24) >>> 0) + (bytes[pos + 1] << 16) + (bytes[pos + 2] << 8) + bytes[pos + 3];
      if (length > max) {
        this._overLimit(length, bytes.subarray(0, 0), bytes.subarray(pos));
        return;
      }
      const end = pos + HEADER + length;
      if (end <= size) {
        deliver(bytes.subarray(pos + HEADER, end), false);
        pos = end;
        continue;
      }
      // Need more: keep the tail; the buffer grows as the rest arrives.
      this._headerHave = HEADER;
      this._payload = new Uint8Array(0);
      this._payloadLength = length;
      this._payloadHave = 0;
      this._reserve(size - pos - HEADER);
      this._payload.set(bytes.subarray(pos + HEADER, size), 0);
      this._payloadHave = size - pos - HEADER;
      return;
    }
  }

  _takeLine() {
    const pieces = this._pieces;
    let line;
    if (pieces.length === 1) {
      line = pieces[0].slice();
    } else {
      line = new Uint8Array(this._pendingLength);
      let at = 0;
      for (const p of pieces) {
        line.set(p, at);
        at += p.length;
      }
    }
    this._pieces = [];
    this._pendingLength = 0;
    return line;
  }

  _pushJson(bytes, deliver) {
    const size = bytes.length;
    const max = this._max;
    let pos = 0;
    if (this._pendingLength > 0) {
      const nl = bytes.indexOf(NEWLINE);
      const take = nl < 0 ? size : nl;
      if (this._pendingLength + take > max) {
        const declared = this._pendingLength + take;
        this._overLimit(declared, this._takeLine(), bytes);
        return;
      }
      if (take > 0) {
        this._pieces.push(bytes.slice(0, take));
        this._pendingLength += take;
      }
      if (nl < 0) return;
      deliver(this._takeLine(), true);
      pos = take + 1;
    }
    while (pos < size) {
      const remaining = size - pos;
      const scan = max < remaining ? max + 1 : remaining;
      const nl = bytes.indexOf(NEWLINE, pos);
      if (nl < 0 || nl - pos >= scan) {
        if (remaining > max) {
          this._overLimit(remaining, bytes.subarray(0, 0), bytes.subarray(pos));
          return;
        }
        this._pieces.push(bytes.slice(pos, size));
        this._pendingLength = remaining;
        return;
      }
      deliver(bytes.subarray(pos, nl), false);
      pos = nl + 1;
    }
  }
}

module.exports = { JsFramer };
