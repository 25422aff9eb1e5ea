'use strict';
// The fallback's copy of src/core/v8_scan.cc: finds, before V8 decodes a
// payload, any resizable ArrayBuffer ('~') whose maxByteLength is over a
// limit, since V8 reserves that much address space up front. It walks the
// wire format value by value without building anything; see the C++ file
// for the format notes. Returns 'clean', 'too-large' or 'inconclusive'.

const MAX_DEPTH = 512;
const TILDE = 0x7e;

function scanForOversizedBuffers(bytes, limit) {
  let p = 0;
  const end = bytes.length;
  let version = 0;
  let tooLarge = false;

  const varint = () => {
    let v = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (p >= end) return -1;
      const b = bytes[p++];
      v += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) return v;
      scale *= 128;
    }
    return -1;
  };
  const skip = (n) => {
    if (n < 0 || n > end - p) return false;
    p += n;
    return true;
  };
  const skipVarints = (n) => {
    for (let i = 0; i < n; i++) if (varint() < 0) return false;
    return true;
  };
  const lengthPrefixed = () => skip(varint());
  const bigInt = () => {
    const bitfield = varint();
    return bitfield >= 0 && skip(Math.floor(bitfield / 2) % 2 ** 30);
  };
  const view = () => {
    if (p >= end) return false;
    p++;
    return skipVarints(version >= 14 ? 3 : 2);
  };
  const maybeView = () => {
    if (p < end && bytes[p] === 0x56) {
      p++;
      return view();
    }
    return true;
  };
  const until = (endTag, endVarints, depth) => {
    for (;;) {
      while (p < end && bytes[p] === 0) p++;
      if (p >= end) return false;
      if (bytes[p] === endTag) {
        p++;
        return skipVarints(endVarints);
      }
      if (!value(depth + 1)) return false;
    }
  };
  const error = (depth) => {
    for (;;) {
      if (p >= end) return false;
      const sub = String.fromCharCode(bytes[p++]);
      if ('ERFSTU'.includes(sub)) continue;
      if (sub === 'm' || sub === 's' || sub === 'c') {
        if (!value(depth + 1)) return false;
        continue;
      }
      return sub === '.';
    }
  };
  const hostObject = (depth) => {
    const tag = varint();
    if (tag === 0) return skipVarints(1) && skip(varint());
    if (tag === 1) return value(depth + 1);
    if (tag === 2) return skipVarints(4);
    return false;
  };
  function value(depth) {
    if (depth > MAX_DEPTH) return false;
    let tag;
    do {
      if (p >= end) return false;
      tag = bytes[p++];
    } while (tag === 0);
    switch (String.fromCharCode(tag)) {
      case '?': return skipVarints(1) && value(depth);
      case '-': case '_': case '0': case 'T': case 'F': case 'y': case 'x': return true;
      case 'I': case 'U': case '^': case 'p': return skipVarints(1);
      case 't': case 'u': return skipVarints(1) && maybeView();
      case 'N': case 'D': case 'n': return skip(8);
      case 'Z': case 'z': return bigInt();
      case '"': case 'c': case 'S': return lengthPrefixed();
      case 's': return value(depth + 1);
      case 'R': return value(depth + 1) && skipVarints(1);
      case 'o': return until(0x7b, 1, depth);
      case 'a': return skipVarints(1) && until(0x40, 2, depth);
      case 'A': return skipVarints(1) && until(0x24, 2, depth);
      case ';': return until(0x3a, 1, depth);
      case '\'': return until(0x2c, 1, depth);
      case 'B': return lengthPrefixed() && maybeView();
      case '~': {
        const length = varint();
        const max = varint();
        if (length < 0 || max < 0) return false;
        if (max > limit) {
          tooLarge = true;
          return false;
        }
        return skip(length) && maybeView();
      }
      case 'V': return view();
      case '\\': return hostObject(depth);
      case 'r': return error(depth);
      default: return false;
    }
  }

  if (p < end && bytes[p] === 0xff) {
    p++;
    version = varint();
    if (version < 0) return 'inconclusive';
  }
  if (!value(0)) return tooLarge ? 'too-large' : 'inconclusive';
  return 'clean';
}

module.exports = { scanForOversizedBuffers, TILDE };
