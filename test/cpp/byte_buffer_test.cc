// Tests for ByteBuffer, the growable buffer under FrameReader's reassembly.
#include "byte_buffer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace procwire {
namespace {

TEST(ByteBuffer, StartsEmptyWithoutAllocating) {
  ByteBuffer b;
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.capacity(), 0u);
  EXPECT_EQ(b.data(), nullptr);
}

TEST(ByteBuffer, AppendGrowsAndKeepsBytesInOrder) {
  ByteBuffer b;
  std::string expected;
  for (int i = 0; i < 500; i++) {
    const std::string piece = "piece-" + std::to_string(i) + ";";
    b.Append(reinterpret_cast<const uint8_t*>(piece.data()), piece.size());
    expected += piece;
    ASSERT_GE(b.capacity(), b.size());
  }
  ASSERT_EQ(b.size(), expected.size());
  EXPECT_EQ(std::memcmp(b.data(), expected.data(), expected.size()), 0);
}

TEST(ByteBuffer, AppendOfNothingDoesNotAllocate) {
  ByteBuffer b;
  b.Append(nullptr, 0);
  EXPECT_EQ(b.capacity(), 0u);
  EXPECT_TRUE(b.empty());
}

TEST(ByteBuffer, ReserveIsExactAndNeverShrinks) {
  ByteBuffer b;
  b.Reserve(1000);
  EXPECT_EQ(b.capacity(), 1000u);
  b.Reserve(10);
  EXPECT_EQ(b.capacity(), 1000u);
  EXPECT_EQ(b.size(), 0u);
}

TEST(ByteBuffer, CommitAccountsBytesWrittenIntoCapacity) {
  ByteBuffer b;
  b.Reserve(16);
  std::memcpy(b.data(), "abcdef", 6);
  b.Commit(6);
  EXPECT_EQ(b.size(), 6u);
  b.Append(reinterpret_cast<const uint8_t*>("gh"), 2);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(b.data()), b.size()), "abcdefgh");
}

TEST(ByteBuffer, ClearKeepsCapacityResetFreesIt) {
  ByteBuffer b;
  b.Append(reinterpret_cast<const uint8_t*>("xyz"), 3);
  const size_t cap = b.capacity();
  b.Clear();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.capacity(), cap);
  b.Reset();
  EXPECT_EQ(b.capacity(), 0u);
  EXPECT_EQ(b.data(), nullptr);
  // A reset buffer is usable again.
  b.Append(reinterpret_cast<const uint8_t*>("q"), 1);
  EXPECT_EQ(b.size(), 1u);
}

}  // namespace
}  // namespace procwire
