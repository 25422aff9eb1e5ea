// Tests for the string headers of src/core/v8_string.h. The expected bytes
// are what Node 20's IPC serializer wrote for the same strings (the frame's
// 4-byte length counts towards the padding parity).
#include "v8_string.h"

#include <gtest/gtest.h>

#include <vector>

namespace procwire {
namespace {

std::vector<uint8_t> Header(bool two_byte, uint32_t byte_length, size_t frame_offset) {
  std::vector<uint8_t> out(8, 0xee);
  const uint8_t* end = v8_string::WriteHeader(out.data(), two_byte, byte_length, frame_offset);
  out.resize(static_cast<size_t>(end - out.data()));
  EXPECT_EQ(out.size(), v8_string::HeaderSize(two_byte, byte_length, frame_offset));
  return out;
}

TEST(V8String, OneByteStringsHaveNoPadding) {
  // 'ab' as a whole message: the tag is 6 bytes into the frame.
  EXPECT_EQ(Header(false, 2, 6), (std::vector<uint8_t>{0x22, 0x02}));
  EXPECT_EQ(Header(false, 2, 7), (std::vector<uint8_t>{0x22, 0x02}));
  // 'x'.repeat(200): a two-byte varint.
  EXPECT_EQ(Header(false, 200, 6), (std::vector<uint8_t>{0x22, 0xc8, 0x01}));
}

TEST(V8String, TwoByteCharactersStartEvenInTheFrame) {
  // '\u0100' as a whole message, and as the second element of [1, '\u0100']
  // (tag at 10): the characters already start even.
  EXPECT_EQ(Header(true, 2, 6), (std::vector<uint8_t>{0x63, 0x02}));
  EXPECT_EQ(Header(true, 2, 10), (std::vector<uint8_t>{0x63, 0x02}));
  // '\u0100'.repeat(64): 128 bytes take a two-byte varint, so a padding
  // byte comes first.
  EXPECT_EQ(Header(true, 128, 6), (std::vector<uint8_t>{0x00, 0x63, 0x80, 0x01}));
  EXPECT_EQ(Header(true, 2, 7), (std::vector<uint8_t>{0x00, 0x63, 0x02}));
}

TEST(V8String, VarintSizesAtTheirBoundaries) {
  EXPECT_EQ(v8_string::VarintSize(0), 1u);
  EXPECT_EQ(v8_string::VarintSize(127), 1u);
  EXPECT_EQ(v8_string::VarintSize(128), 2u);
  EXPECT_EQ(v8_string::VarintSize(16383), 2u);
  EXPECT_EQ(v8_string::VarintSize(16384), 3u);
  EXPECT_EQ(v8_string::VarintSize(0xffffffffu), 5u);
  uint8_t out[5];
  EXPECT_EQ(v8_string::WriteVarint(out, 0xffffffffu) - out, 5);
  EXPECT_EQ(out[4], 0x0f);
}

}  // namespace
}  // namespace procwire
