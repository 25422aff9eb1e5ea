// Tests for ScanForOversizedBuffers. The payloads were written by Node 20's
// own v8.Serializer (hex below), so the walk is checked against V8's real
// output, not against our reading of the format.
#include "v8_scan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace procwire {
namespace {

std::vector<uint8_t> Hex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

ScanResult Scan(const std::vector<uint8_t>& b, uint64_t limit) {
  return ScanForOversizedBuffers(b.data(), b.size(), limit);
}

// { a: 1, s: 'x~y', arr: [1, 2, { b: null }], m: Map{1 => '~'}, set: Set{2},
//   d: Date(0), r: /a~b/gi, big: 12345678901234567890n, e: RangeError('bad~') }
// (the error's stack trimmed to one line).
const char kPlain[] =
    "ff0f6f22016149022201732203787e7922036172724103490249046f220162307b0124000322016d3b490222017e3a02"
    "22037365742749042c01220164440000000000000000220172522203617e620322036269675a10d20a1feb8ca954ab22"
    "016572526d22046261647e73220352616e2e7b09";
// { x: [1, '~', new ArrayBuffer(8, { maxByteLength: 1 << 20 })] }
const char kResizable[] = "ff0f6f2201784103490222017e7e0880804000000000000000002400037b01";
// { v: new Uint8Array(new ArrayBuffer(8, { maxByteLength: 64 })) }: a
// resizable buffer followed by a length-tracking view on it.
const char kResizableView[] = "ff0f6f2201767e0840000000000000000056420000037b01";

TEST(V8Scan, OrdinaryValuesWithTildesInStringsAreClean) {
  EXPECT_EQ(Scan(Hex(kPlain), 0), ScanResult::kClean);
}

TEST(V8Scan, ResizableBufferIsJudgedByItsMaxByteLength) {
  EXPECT_EQ(Scan(Hex(kResizable), 1 << 20), ScanResult::kClean);
  EXPECT_EQ(Scan(Hex(kResizable), (1 << 20) - 1), ScanResult::kTooLarge);
  EXPECT_EQ(Scan(Hex(kResizableView), 64), ScanResult::kClean);
  EXPECT_EQ(Scan(Hex(kResizableView), 63), ScanResult::kTooLarge);
}

TEST(V8Scan, HugeMaxByteLengthInTwentyBytes) {
  // '~', length 0, maxByteLength 2^40.
  std::vector<uint8_t> b = {0xff, 0x0f, '~', 0x00, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20};
  EXPECT_EQ(Scan(b, uint64_t{256} << 20), ScanResult::kTooLarge);
}

TEST(V8Scan, NodeHostObjectsAreWalked) {
  // { b: <Buffer 7e 7e> } as procwire/Node write it: host object, tag 0,
  // type index 10 (Buffer), 2 bytes; then a resizable buffer after it.
  std::vector<uint8_t> b = {0xff, 0x0f, 'o', '"', 1,   'b', '\\', 0,    10,   2,   '~',
                            '~',  '"',  1,   'c', '~', 0,   0x80, 0x80, 0x04, '{', 2};
  EXPECT_EQ(Scan(b, 1 << 16), ScanResult::kClean);
  EXPECT_EQ(Scan(b, (1 << 16) - 1), ScanResult::kTooLarge);
}

TEST(V8Scan, EveryTruncationIsCleanOnlyWhenWhole) {
  for (const char* hex : {kPlain, kResizable, kResizableView}) {
    const std::vector<uint8_t> whole = Hex(hex);
    for (size_t n = 0; n < whole.size(); n++) {
      std::vector<uint8_t> cut(whole.begin(), whole.begin() + static_cast<long>(n));
      EXPECT_NE(Scan(cut, uint64_t{1} << 40), ScanResult::kClean) << hex << " cut at " << n;
    }
  }
}

TEST(V8Scan, UnknownTagsAndDeepNestingAreInconclusive) {
  EXPECT_EQ(Scan({0xff, 0x0f, 0x01}, 0), ScanResult::kInconclusive);
  std::vector<uint8_t> deep = {0xff, 0x0f};
  for (int i = 0; i < 10000; i++) deep.push_back('A'), deep.push_back(1);
  EXPECT_EQ(Scan(deep, 0), ScanResult::kInconclusive);
}

}  // namespace
}  // namespace procwire
