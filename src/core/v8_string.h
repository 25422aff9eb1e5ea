// How V8's ValueSerializer writes a string, for the advanced codec's fast
// path: a string V8 stores one byte wide as '"', a varint byte count and its
// Latin-1 bytes; a two-byte string as 'c', a varint byte count and its
// UTF-16LE code units, after one padding byte (0) when the code units would
// otherwise start at an odd offset of the serializer's buffer. In Node's
// IPC that buffer starts with the frame's 4-byte length, so the parity is
// counted from the start of the frame.
//
// Pure C++17, header only: no V8 or Node includes. Stateless; any thread.
#ifndef PROCWIRE_CORE_V8_STRING_H_
#define PROCWIRE_CORE_V8_STRING_H_

#include <cstddef>
#include <cstdint>

namespace procwire {
namespace v8_string {

constexpr uint8_t kPadding = 0x00;
constexpr uint8_t kOneByteTag = 0x22;  // '"'
constexpr uint8_t kTwoByteTag = 0x63;  // 'c'

// Bytes of `value` as V8's base-128 varint (low groups first).
inline size_t VarintSize(uint32_t value) {
  size_t n = 1;
  while (value >= 0x80) {
    value >>= 7;
    n++;
  }
  return n;
}

// Writes `value` as a varint at `out` -> the byte after it.
inline uint8_t* WriteVarint(uint8_t* out, uint32_t value) {
  while (value >= 0x80) {
    *out++ = static_cast<uint8_t>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  *out++ = static_cast<uint8_t>(value);
  return out;
}

// Bytes before the characters of a string of `byte_length` bytes whose tag
// would be written `frame_offset` bytes into its frame: the padding byte
// (two-byte strings at an odd position only), the tag and the byte count.
inline size_t HeaderSize(bool two_byte, uint32_t byte_length, size_t frame_offset) {
  const size_t tag_and_count = 1 + VarintSize(byte_length);
  if (!two_byte) return tag_and_count;
  return tag_and_count + ((frame_offset + tag_and_count) & 1);
}

// Writes that header at `out` -> where the characters go.
inline uint8_t* WriteHeader(uint8_t* out, bool two_byte, uint32_t byte_length, size_t frame_offset) {
  if (two_byte && ((frame_offset + 1 + VarintSize(byte_length)) & 1) != 0) *out++ = kPadding;
  *out++ = two_byte ? kTwoByteTag : kOneByteTag;
  return WriteVarint(out, byte_length);
}

}  // namespace v8_string
}  // namespace procwire

#endif  // PROCWIRE_CORE_V8_STRING_H_
