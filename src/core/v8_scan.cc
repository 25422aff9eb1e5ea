#include "v8_scan.h"

namespace procwire {

namespace {

// Deeper nesting than this is inconclusive; V8's own limit is its stack.
constexpr int kMaxDepth = 512;

class Scanner {
 public:
  Scanner(const uint8_t* data, size_t size, uint64_t limit) : p_(data), end_(data + size), limit_(limit) {}

  ScanResult Run() {
    // Header: 0xFF, version. Without one V8 reads version 0 data; the walk
    // below does not depend on the version except for view flags.
    if (p_ < end_ && *p_ == 0xFF) {
      p_++;
      uint64_t v;
      if (!Varint(&v)) return ScanResult::kInconclusive;
      version_ = v;
    }
    if (!Value(0)) return too_large_ ? ScanResult::kTooLarge : ScanResult::kInconclusive;
    return ScanResult::kClean;
  }

 private:
  bool Byte(uint8_t* out) {
    if (p_ >= end_) return false;
    *out = *p_++;
    return true;
  }

  bool Varint(uint64_t* out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!Byte(&b)) return false;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *out = v;
        return true;
      }
    }
    return false;
  }

  bool Skip(uint64_t n) {
    if (n > static_cast<uint64_t>(end_ - p_)) return false;
    p_ += n;
    return true;
  }

  bool SkipVarints(int n) {
    uint64_t v;
    for (int i = 0; i < n; i++) {
      if (!Varint(&v)) return false;
    }
    return true;
  }

  bool LengthPrefixed() {
    uint64_t n;
    return Varint(&n) && Skip(n);
  }

  bool BigInt() {
    uint64_t bitfield;
    if (!Varint(&bitfield)) return false;
    // Bit 0 is the sign; the next 30 bits the digits' byte length.
    return Skip((bitfield >> 1) & ((uint64_t{1} << 30) - 1));
  }

  // Values until `end_tag`, then the end tag's varints.
  bool Until(uint8_t end_tag, int end_varints, int depth) {
    for (;;) {
      // Padding may precede any tag.
      while (p_ < end_ && *p_ == 0x00) p_++;
      if (p_ >= end_) return false;
      if (*p_ == end_tag) {
        p_++;
        return SkipVarints(end_varints);
      }
      if (!Value(depth + 1)) return false;
    }
  }

  bool Error(int depth) {
    for (;;) {
      uint8_t sub;
      if (!Byte(&sub)) return false;
      switch (sub) {
        case 'E':
        case 'R':
        case 'F':
        case 'S':
        case 'T':
        case 'U':
          break;  // the prototype: no data
        case 'm':
        case 's':
        case 'c':
          // message, stack: a string value; cause: any value.
          if (!Value(depth + 1)) return false;
          break;
        case '.':
          return true;
        default:
          return false;
      }
    }
  }

  // Node's host objects (procwire's codec): a varint tag, then for 0 (a
  // view) type index, byte length and the bytes; for 1 (another host
  // object) a value; for 2 (a view in a segment) four varints.
  bool HostObject(int depth) {
    uint64_t tag;
    if (!Varint(&tag)) return false;
    if (tag == 0) {
      uint64_t length;
      return SkipVarints(1) && Varint(&length) && Skip(length);
    }
    if (tag == 1) return Value(depth + 1);
    if (tag == 2) return SkipVarints(4);
    return false;
  }

  bool Value(int depth) {
    if (depth > kMaxDepth) return false;
    uint8_t tag;
    do {
      if (!Byte(&tag)) return false;
    } while (tag == 0x00);
    switch (tag) {
      case '?':  // verify-object-count, then the value
        return SkipVarints(1) && Value(depth);
      case '-':
      case '_':
      case '0':
      case 'T':
      case 'F':
      case 'y':
      case 'x':
        return true;
      case 'I':
      case 'U':
      case '^':
      case 'p':
        return SkipVarints(1);
      case 't':
      case 'u':  // transferred or shared ArrayBuffer ids
        return SkipVarints(1) && MaybeView();
      case 'N':
      case 'D':
      case 'n':
        return Skip(8);
      case 'Z':
      case 'z':
        return BigInt();
      case '"':
      case 'c':
      case 'S':
        return LengthPrefixed();
      case 's':  // String object: a string value
        return Value(depth + 1);
      case 'R':  // RegExp: the pattern (a string value), then flags
        return Value(depth + 1) && SkipVarints(1);
      case 'o':
        return Until('{', 1, depth);
      case 'a':
        return SkipVarints(1) && Until('@', 2, depth);
      case 'A':
        return SkipVarints(1) && Until('$', 2, depth);
      case ';':
        return Until(':', 1, depth);
      case '\'':
        return Until(',', 1, depth);
      case 'B':
        return LengthPrefixed() && MaybeView();
      case '~': {
        uint64_t length, max;
        if (!Varint(&length) || !Varint(&max)) return false;
        if (max > limit_) {
          too_large_ = true;
          return false;
        }
        return Skip(length) && MaybeView();
      }
      case 'V':
        return View();
      case '\\':
        return HostObject(depth);
      case 'r':
        return Error(depth);
      default:
        return false;
    }
  }

  // An ArrayBuffer may be followed by a view on it.
  bool MaybeView() {
    if (p_ < end_ && *p_ == 'V') {
      p_++;
      return View();
    }
    return true;
  }

  bool View() {
    uint8_t subtag;
    if (!Byte(&subtag)) return false;
    // Offset, length, and from version 14 on, flags.
    return SkipVarints(version_ >= 14 ? 3 : 2);
  }

  const uint8_t* p_;
  const uint8_t* end_;
  uint64_t limit_;
  uint64_t version_ = 0;
  bool too_large_ = false;
};

}  // namespace

ScanResult ScanForOversizedBuffers(const uint8_t* data, size_t size, uint64_t limit) {
  return Scanner(data, size, limit).Run();
}

}  // namespace procwire
