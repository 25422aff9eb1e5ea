// Tests for ParseFrame and FrameReader: both framings, every way a stream can
// be cut into chunks, size limits at the unsigned boundaries, the direct-read
// tail and the reassembly buffer's memory policy.
#include "frame_reader.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PROCWIRE_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define PROCWIRE_TEST_ASAN 1
#endif

#ifdef PROCWIRE_TEST_ASAN
// Declared here rather than via <sanitizer/allocator_interface.h>, which GCC
// does not install; libasan exports it under both compilers.
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#else
#include <malloc.h>
#endif

namespace procwire {
namespace {

// Heap bytes currently allocated by this process. ASan replaces malloc, so
// glibc's statistics would not see its blocks; ask ASan instead when present.
size_t AllocatedBytes() {
#ifdef PROCWIRE_TEST_ASAN
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
#endif
}

std::string Header(uint32_t length) {
  uint8_t h[4];
  WriteU32BigEndian(h, length);
  return std::string(reinterpret_cast<char*>(h), 4);
}

std::string Adv(const std::string& payload) {
  return Header(static_cast<uint32_t>(payload.size())) + payload;
}

const uint8_t* U8(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

// Bytes 0..255 repeated, so misplaced offsets show up as wrong content.
std::string Pattern(size_t n, uint8_t seed = 0) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i++) s[i] = static_cast<char>(static_cast<uint8_t>(seed + i * 7));
  return s;
}

// A json-safe pattern: never contains '\n'.
std::string Line(size_t n, char seed = 'a') {
  std::string s(n, 'x');
  for (size_t i = 0; i < n; i++) s[i] = static_cast<char>('a' + (seed - 'a' + i) % 26);
  return s;
}

struct Got {
  std::string payload;
  bool in_place;
  size_t chunk_offset;
};

// Records every frame, checking on the spot that an in-place frame really
// points into the chunk being pushed at the offset it claims.
class Collector {
 public:
  void SetChunk(const uint8_t* data, size_t size) {
    chunk_ = data;
    chunk_size_ = size;
  }
  void operator()(const FrameReader::Frame& f) {
    if (f.in_place) {
      EXPECT_EQ(f.data, chunk_ + f.chunk_offset);
      EXPECT_LE(f.chunk_offset + f.size, chunk_size_);
    } else {
      EXPECT_EQ(f.chunk_offset, 0u);
    }
    frames.push_back(
        Got{std::string(reinterpret_cast<const char*>(f.data), f.size), f.in_place, f.chunk_offset});
  }
  std::vector<Got> frames;

 private:
  const uint8_t* chunk_ = nullptr;
  size_t chunk_size_ = 0;
};

FramingError PushChunk(FrameReader& r, Collector& c, const uint8_t* data, size_t size) {
  c.SetChunk(data, size);
  return r.Push(data, size, c);
}

FramingError PushStr(FrameReader& r, Collector& c, const std::string& s) {
  return PushChunk(r, c, U8(s), s.size());
}

// Where a frame lies in a whole stream: [start, end) covers header or
// terminator too; payload is [payload_start, payload_start + payload_size).
struct Span {
  size_t start, end, payload_start, payload_size;
};

// An independent, whole-stream parse used as the reference for chunked reads.
std::vector<Span> ModelSpans(WireFormat format, const std::string& s) {
  std::vector<Span> spans;
  size_t pos = 0;
  if (format == WireFormat::kAdvanced) {
    while (s.size() - pos >= 4) {
      const size_t len = ReadU32BigEndian(U8(s) + pos);
      if (s.size() - pos - 4 < len) break;
      spans.push_back(Span{pos, pos + 4 + len, pos + 4, len});
      pos += 4 + len;
    }
  } else {
    for (;;) {
      const size_t nl = s.find('\n', pos);
      if (nl == std::string::npos) break;
      spans.push_back(Span{pos, nl + 1, pos, nl - pos});
      pos = nl + 1;
    }
  }
  return spans;
}

// Pushes `s` cut at `cuts` (ascending) and checks every frame against the
// model: payload, whether it is in place (it must be exactly when the whole
// frame lies inside one chunk), and its offset inside that chunk.
void CheckSplit(WireFormat format, const std::string& s, const std::vector<size_t>& cuts) {
  std::vector<size_t> bounds{0};
  for (size_t c : cuts) bounds.push_back(c);
  bounds.push_back(s.size());
  FrameReader reader(format, 1 << 20);
  Collector col;
  for (size_t i = 0; i + 1 < bounds.size(); i++) {
    ASSERT_EQ(PushChunk(reader, col, U8(s) + bounds[i], bounds[i + 1] - bounds[i]), FramingError::kNone);
  }
  const std::vector<Span> spans = ModelSpans(format, s);
  ASSERT_EQ(col.frames.size(), spans.size());
  for (size_t k = 0; k < spans.size(); k++) {
    const Span& sp = spans[k];
    EXPECT_EQ(col.frames[k].payload, s.substr(sp.payload_start, sp.payload_size)) << "frame " << k;
    size_t chunk_start = 0;
    bool whole = false;
    for (size_t i = 0; i + 1 < bounds.size(); i++) {
      if (bounds[i] <= sp.start && sp.end <= bounds[i + 1] && bounds[i] < bounds[i + 1]) {
        whole = true;
        chunk_start = bounds[i];
        break;
      }
    }
    EXPECT_EQ(col.frames[k].in_place, whole) << "frame " << k;
    if (whole) {
      EXPECT_EQ(col.frames[k].chunk_offset, sp.payload_start - chunk_start);
    }
  }
  const size_t tail = spans.empty() ? s.size() : s.size() - spans.back().end;
  EXPECT_EQ(reader.buffered(), tail);
}

// ---- ParseFrame ------------------------------------------------------------

TEST(ParseFrame, AdvancedNeedsHeaderFirst) {
  const std::string h = Header(10);
  for (size_t n = 0; n < 4; n++) {
    ParseResult r = ParseFrame(WireFormat::kAdvanced, U8(h), n, 100);
    EXPECT_EQ(r.status, ParseResult::Status::kNeedMore);
    EXPECT_EQ(r.size_hint, 4u);
  }
  ParseResult r = ParseFrame(WireFormat::kAdvanced, U8(h), 4, 100);
  EXPECT_EQ(r.status, ParseResult::Status::kNeedMore);
  EXPECT_EQ(r.size_hint, 14u);
}

TEST(ParseFrame, AdvancedCompleteFrame) {
  const std::string s = Adv("hello") + "trailing";
  ParseResult r = ParseFrame(WireFormat::kAdvanced, U8(s), s.size(), 5);
  ASSERT_EQ(r.status, ParseResult::Status::kOk);
  EXPECT_EQ(r.payload_offset, 4u);
  EXPECT_EQ(r.payload_size, 5u);
  EXPECT_EQ(r.consumed, 9u);
}

TEST(ParseFrame, LengthsAreUnsignedAtTheTop) {
  // With the limit at the top of the u32 range these are legal lengths still
  // waiting for their payload, not negative numbers or errors.
  for (uint32_t len : {0x7fffffffu, 0x80000000u, 0x80000001u, 0xffffffffu}) {
    const std::string h = Header(len);
    ParseResult r = ParseFrame(WireFormat::kAdvanced, U8(h), 4, 0xffffffffu);
    EXPECT_EQ(r.status, ParseResult::Status::kNeedMore) << len;
    EXPECT_EQ(r.size_hint, 4u + static_cast<size_t>(len)) << len;
  }
}

TEST(ParseFrame, AdvancedTooLargeReportsDeclaredSize) {
  const std::string h = Header(0x80000000u);
  ParseResult r = ParseFrame(WireFormat::kAdvanced, U8(h), 4, 0x7fffffffu);
  ASSERT_EQ(r.status, ParseResult::Status::kError);
  EXPECT_EQ(r.error, FramingError::kMessageTooLarge);
  EXPECT_EQ(r.declared_size, 0x80000000u);
}

TEST(ParseFrame, JsonLines) {
  const std::string s = "abc\ndef";
  ParseResult r = ParseFrame(WireFormat::kJson, U8(s), s.size(), 100);
  ASSERT_EQ(r.status, ParseResult::Status::kOk);
  EXPECT_EQ(r.payload_offset, 0u);
  EXPECT_EQ(r.payload_size, 3u);
  EXPECT_EQ(r.consumed, 4u);
  r = ParseFrame(WireFormat::kJson, U8(s) + 4, 3, 100);
  EXPECT_EQ(r.status, ParseResult::Status::kNeedMore);
  EXPECT_EQ(r.size_hint, 0u);
}

TEST(ParseFrame, JsonLimitIsOnThePayloadNotTheTerminator) {
  const std::string s = "abcde\n";
  EXPECT_EQ(ParseFrame(WireFormat::kJson, U8(s), s.size(), 5).status, ParseResult::Status::kOk);
  ParseResult r = ParseFrame(WireFormat::kJson, U8(s), s.size(), 4);
  EXPECT_EQ(r.status, ParseResult::Status::kError);
  EXPECT_EQ(r.error, FramingError::kMessageTooLarge);
  // Exactly max bytes with no newline yet may still become a legal line.
  EXPECT_EQ(ParseFrame(WireFormat::kJson, U8(s), 5, 5).status, ParseResult::Status::kNeedMore);
}

TEST(ParseFrame, JsonWithUnboundedLimitStillFindsLines) {
  // A limit of SIZE_MAX means "no limit"; the scan bound must not wrap to 0.
  const std::string s = "a\nb\n";
  ParseResult r = ParseFrame(WireFormat::kJson, U8(s), s.size(), std::numeric_limits<size_t>::max());
  ASSERT_EQ(r.status, ParseResult::Status::kOk);
  EXPECT_EQ(r.payload_size, 1u);
  EXPECT_EQ(r.consumed, 2u);
}

// ---- FrameReader: whole chunks -------------------------------------------

TEST(FrameReader, ManyAdvancedFramesInOneChunkAreInPlace) {
  std::string s;
  std::vector<std::string> payloads;
  std::vector<size_t> offsets;
  for (int i = 0; i < 1000; i++) {
    payloads.push_back(Pattern(static_cast<size_t>(i % 37), static_cast<uint8_t>(i)));
    offsets.push_back(s.size() + 4);
    s += Adv(payloads.back());
  }
  FrameReader reader(WireFormat::kAdvanced, 1 << 20);
  Collector col;
  ASSERT_EQ(PushStr(reader, col, s), FramingError::kNone);
  ASSERT_EQ(col.frames.size(), payloads.size());
  for (size_t i = 0; i < payloads.size(); i++) {
    EXPECT_EQ(col.frames[i].payload, payloads[i]);
    EXPECT_TRUE(col.frames[i].in_place);
    EXPECT_EQ(col.frames[i].chunk_offset, offsets[i]);
  }
  EXPECT_EQ(reader.buffered(), 0u);
}

TEST(FrameReader, ManyJsonLinesInOneChunkAreInPlace) {
  std::string s;
  std::vector<std::string> lines;
  std::vector<size_t> offsets;
  for (int i = 0; i < 1000; i++) {
    lines.push_back(Line(static_cast<size_t>(i % 29), static_cast<char>('a' + i % 26)));
    offsets.push_back(s.size());
    s += lines.back() + "\n";
  }
  FrameReader reader(WireFormat::kJson, 1 << 20);
  Collector col;
  ASSERT_EQ(PushStr(reader, col, s), FramingError::kNone);
  ASSERT_EQ(col.frames.size(), lines.size());
  for (size_t i = 0; i < lines.size(); i++) {
    EXPECT_EQ(col.frames[i].payload, lines[i]);
    EXPECT_TRUE(col.frames[i].in_place);
    EXPECT_EQ(col.frames[i].chunk_offset, offsets[i]);
  }
  EXPECT_EQ(reader.buffered(), 0u);
}

TEST(FrameReader, ZeroLengthPayloads) {
  {
    FrameReader reader(WireFormat::kAdvanced, 0);
    Collector col;
    const std::string s = Adv("") + Adv("") + Adv("");
    ASSERT_EQ(PushStr(reader, col, s), FramingError::kNone);
    ASSERT_EQ(col.frames.size(), 3u);
    for (size_t i = 0; i < 3; i++) {
      EXPECT_EQ(col.frames[i].payload, "");
      EXPECT_TRUE(col.frames[i].in_place);
      EXPECT_EQ(col.frames[i].chunk_offset, 4 * i + 4);
    }
  }
  {
    FrameReader reader(WireFormat::kJson, 0);
    Collector col;
    ASSERT_EQ(PushStr(reader, col, "\n\n\n"), FramingError::kNone);
    ASSERT_EQ(col.frames.size(), 3u);
    for (const Got& g : col.frames) EXPECT_EQ(g.payload, "");
  }
  {
    // A zero-length frame whose header is split still completes once the
    // last header byte arrives, with nothing left buffered.
    FrameReader reader(WireFormat::kAdvanced, 0);
    Collector col;
    const std::string h = Header(0);
    ASSERT_EQ(PushChunk(reader, col, U8(h), 3), FramingError::kNone);
    EXPECT_EQ(col.frames.size(), 0u);
    EXPECT_EQ(reader.buffered(), 3u);
    ASSERT_EQ(PushChunk(reader, col, U8(h) + 3, 1), FramingError::kNone);
    ASSERT_EQ(col.frames.size(), 1u);
    EXPECT_FALSE(col.frames[0].in_place);
    EXPECT_EQ(reader.buffered(), 0u);
  }
}

TEST(FrameReader, EmptyPushIsHarmless) {
  FrameReader reader(WireFormat::kAdvanced, 100);
  Collector col;
  EXPECT_EQ(PushChunk(reader, col, nullptr, 0), FramingError::kNone);
  const std::string s = Adv("abc");
  ASSERT_EQ(PushChunk(reader, col, U8(s), 2), FramingError::kNone);
  EXPECT_EQ(PushChunk(reader, col, U8(s) + 2, 0), FramingError::kNone);
  EXPECT_EQ(reader.buffered(), 2u);
  ASSERT_EQ(PushChunk(reader, col, U8(s) + 2, s.size() - 2), FramingError::kNone);
  ASSERT_EQ(col.frames.size(), 1u);
  EXPECT_EQ(col.frames[0].payload, "abc");
}

// ---- FrameReader: every split --------------------------------------------

std::string MixedAdvancedStream() {
  return Adv("hi") + Adv("") + Adv(Pattern(23, 5)) + Adv("z") + Adv("") + Adv(Pattern(9, 77)) + Header(6) +
         "pa";  // A partial frame at the end stays buffered.
}

std::string MixedJsonStream() { return "hi\n\n" + Line(23) + "\nz\n\n" + Line(9, 'q') + "\npartial"; }

TEST(FrameReader, AdvancedSplitAtEveryPosition) {
  const std::string s = MixedAdvancedStream();
  for (size_t i = 0; i <= s.size(); i++) {
    SCOPED_TRACE("cut at " + std::to_string(i));
    CheckSplit(WireFormat::kAdvanced, s, {i});
  }
}

TEST(FrameReader, AdvancedSplitAtEveryPairOfPositions) {
  // Two cuts reach every way a header can straddle three chunks (e.g. 1+2+1
  // bytes) and empty chunks in between (i == j).
  const std::string s = MixedAdvancedStream();
  for (size_t i = 0; i <= s.size(); i++) {
    for (size_t j = i; j <= s.size(); j++) {
      SCOPED_TRACE("cuts at " + std::to_string(i) + "," + std::to_string(j));
      CheckSplit(WireFormat::kAdvanced, s, {i, j});
      if (HasFatalFailure() || HasNonfatalFailure()) return;
    }
  }
}

TEST(FrameReader, AdvancedOneByteAtATime) {
  const std::string s = MixedAdvancedStream();
  std::vector<size_t> cuts;
  for (size_t i = 1; i < s.size(); i++) cuts.push_back(i);
  CheckSplit(WireFormat::kAdvanced, s, cuts);
}

TEST(FrameReader, HeaderSplitInsideLengthIsBufferedByteByByte) {
  const std::string s = Adv("abcdefgh");
  FrameReader reader(WireFormat::kAdvanced, 100);
  Collector col;
  for (size_t i = 0; i < 4; i++) {
    ASSERT_EQ(PushChunk(reader, col, U8(s) + i, 1), FramingError::kNone);
    EXPECT_EQ(reader.buffered(), i + 1);
  }
  ASSERT_EQ(PushChunk(reader, col, U8(s) + 4, 3), FramingError::kNone);
  EXPECT_EQ(reader.buffered(), 7u);
  EXPECT_TRUE(col.frames.empty());
  ASSERT_EQ(PushChunk(reader, col, U8(s) + 7, s.size() - 7), FramingError::kNone);
  ASSERT_EQ(col.frames.size(), 1u);
  EXPECT_EQ(col.frames[0].payload, "abcdefgh");
  EXPECT_FALSE(col.frames[0].in_place);
  EXPECT_EQ(reader.buffered(), 0u);
}

TEST(FrameReader, JsonSplitAtEveryPosition) {
  const std::string s = MixedJsonStream();
  for (size_t i = 0; i <= s.size(); i++) {
    SCOPED_TRACE("cut at " + std::to_string(i));
    CheckSplit(WireFormat::kJson, s, {i});
  }
}

TEST(FrameReader, JsonSplitAtEveryPairOfPositions) {
  const std::string s = MixedJsonStream();
  for (size_t i = 0; i <= s.size(); i++) {
    for (size_t j = i; j <= s.size(); j++) {
      SCOPED_TRACE("cuts at " + std::to_string(i) + "," + std::to_string(j));
      CheckSplit(WireFormat::kJson, s, {i, j});
      if (HasFatalFailure() || HasNonfatalFailure()) return;
    }
  }
}

TEST(FrameReader, JsonLineAcrossThreeChunks) {
  FrameReader reader(WireFormat::kJson, 100);
  Collector col;
  ASSERT_EQ(PushStr(reader, col, "hel"), FramingError::kNone);
  ASSERT_EQ(PushStr(reader, col, "lo"), FramingError::kNone);
  EXPECT_EQ(reader.buffered(), 5u);
  const std::string last = " world\nnext\n";
  ASSERT_EQ(PushStr(reader, col, last), FramingError::kNone);
  ASSERT_EQ(col.frames.size(), 2u);
  EXPECT_EQ(col.frames[0].payload, "hello world");
  EXPECT_FALSE(col.frames[0].in_place);
  EXPECT_EQ(col.frames[1].payload, "next");
  EXPECT_TRUE(col.frames[1].in_place);
  EXPECT_EQ(col.frames[1].chunk_offset, 7u);
  EXPECT_EQ(reader.buffered(), 0u);
}

// ---- FrameReader: size limits ----------------------------------------------

class HugeHeader : public ::testing::TestWithParam<uint32_t> {};

// The bad header is preceded by a valid frame (which must still arrive) and
// followed by bytes that must never be interpreted.
void ExpectStickyTooLarge(FrameReader& reader, Collector& col, uint32_t declared) {
  EXPECT_EQ(reader.error(), FramingError::kMessageTooLarge);
  EXPECT_EQ(reader.error_declared_size(), declared);
  EXPECT_EQ(reader.buffered(), 0u);
  const size_t frames = col.frames.size();
  const std::string more = Adv("") + Adv("");
  for (int i = 0; i < 3; i++) {
    EXPECT_EQ(PushStr(reader, col, more), FramingError::kMessageTooLarge);
  }
  EXPECT_EQ(col.frames.size(), frames);
  EXPECT_EQ(reader.error_declared_size(), declared);
  EXPECT_EQ(reader.buffered(), 0u);
  EXPECT_EQ(reader.WritableTail().data, nullptr);
}

TEST_P(HugeHeader, InOneChunk) {
  const uint32_t len = GetParam();
  FrameReader reader(WireFormat::kAdvanced, len - 1);
  Collector col;
  const std::string s = Adv("") + Header(len) + "junk";
  EXPECT_EQ(PushStr(reader, col, s), FramingError::kMessageTooLarge);
  ASSERT_EQ(col.frames.size(), 1u);
  ExpectStickyTooLarge(reader, col, len);
}

TEST_P(HugeHeader, SplitInsideHeader) {
  const uint32_t len = GetParam();
  const std::string s = Adv("") + Header(len) + "junk";
  for (size_t cut = 5; cut < 8; cut++) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    FrameReader reader(WireFormat::kAdvanced, len - 1);
    Collector col;
    ASSERT_EQ(PushChunk(reader, col, U8(s), cut), FramingError::kNone);
    EXPECT_EQ(reader.buffered(), cut - 4);
    EXPECT_EQ(PushChunk(reader, col, U8(s) + cut, s.size() - cut), FramingError::kMessageTooLarge);
    ASSERT_EQ(col.frames.size(), 1u);
    ExpectStickyTooLarge(reader, col, len);
  }
}

TEST_P(HugeHeader, OneByteAtATime) {
  const uint32_t len = GetParam();
  const std::string s = Header(len);
  FrameReader reader(WireFormat::kAdvanced, len - 1);
  Collector col;
  for (size_t i = 0; i < 3; i++) {
    ASSERT_EQ(PushChunk(reader, col, U8(s) + i, 1), FramingError::kNone);
  }
  EXPECT_EQ(PushChunk(reader, col, U8(s) + 3, 1), FramingError::kMessageTooLarge);
  ExpectStickyTooLarge(reader, col, len);
}

INSTANTIATE_TEST_SUITE_P(Boundaries, HugeHeader,
                         ::testing::Values(1u, 0x7fffffffu, 0x80000000u, 0x80000001u, 0xffffffffu),
                         [](const ::testing::TestParamInfo<uint32_t>& info) {
                           char name[16];
                           std::snprintf(name, sizeof(name), "x%08x", info.param);
                           return std::string(name);
                         });

TEST(FrameReader, AdvancedExactlyAtMaxIsAccepted) {
  for (size_t cut = 0; cut <= 9; cut++) {
    FrameReader reader(WireFormat::kAdvanced, 5);
    Collector col;
    const std::string s = Adv("hello");
    ASSERT_EQ(PushChunk(reader, col, U8(s), cut), FramingError::kNone);
    ASSERT_EQ(PushChunk(reader, col, U8(s) + cut, s.size() - cut), FramingError::kNone);
    ASSERT_EQ(col.frames.size(), 1u);
    EXPECT_EQ(col.frames[0].payload, "hello");
  }
  FrameReader reader(WireFormat::kAdvanced, 5);
  Collector col;
  EXPECT_EQ(PushStr(reader, col, Adv("hello!")), FramingError::kMessageTooLarge);
  EXPECT_EQ(reader.error_declared_size(), 6u);
}

TEST(FrameReader, MaxZeroAllowsOnlyEmptyFrames) {
  FrameReader reader(WireFormat::kAdvanced, 0);
  Collector col;
  EXPECT_EQ(PushStr(reader, col, Adv("") + Adv("x")), FramingError::kMessageTooLarge);
  EXPECT_EQ(col.frames.size(), 1u);
  EXPECT_EQ(reader.error_declared_size(), 1u);
}

TEST(FrameReader, JsonExactlyAtMaxIsAccepted) {
  const std::string s = "abcde\n";
  for (size_t cut = 0; cut <= s.size(); cut++) {
    FrameReader reader(WireFormat::kJson, 5);
    Collector col;
    ASSERT_EQ(PushChunk(reader, col, U8(s), cut), FramingError::kNone);
    ASSERT_EQ(PushChunk(reader, col, U8(s) + cut, s.size() - cut), FramingError::kNone);
    ASSERT_EQ(col.frames.size(), 1u);
    EXPECT_EQ(col.frames[0].payload, "abcde");
  }
}

TEST(FrameReader, JsonOverMaxWithNewline) {
  FrameReader reader(WireFormat::kJson, 5);
  Collector col;
  EXPECT_EQ(PushStr(reader, col, "ok\nabcdef\nlater\n"), FramingError::kMessageTooLarge);
  ASSERT_EQ(col.frames.size(), 1u);
  EXPECT_EQ(col.frames[0].payload, "ok");
  EXPECT_EQ(reader.buffered(), 0u);
  EXPECT_GT(reader.error_declared_size(), 5u);
  EXPECT_EQ(PushStr(reader, col, "x\n"), FramingError::kMessageTooLarge);
  EXPECT_EQ(col.frames.size(), 1u);
}

TEST(FrameReader, JsonOverMaxWithoutNewline) {
  FrameReader reader(WireFormat::kJson, 5);
  Collector col;
  EXPECT_EQ(PushStr(reader, col, "abcdef"), FramingError::kMessageTooLarge);
  EXPECT_EQ(reader.error_declared_size(), 6u);
  EXPECT_EQ(reader.buffered(), 0u);
  EXPECT_EQ(PushStr(reader, col, "\n"), FramingError::kMessageTooLarge);
  EXPECT_TRUE(col.frames.empty());
}

TEST(FrameReader, JsonOverMaxAcrossChunks) {
  {
    // The line crosses the limit in the chunk that also holds its newline.
    FrameReader reader(WireFormat::kJson, 5);
    Collector col;
    ASSERT_EQ(PushStr(reader, col, "abc"), FramingError::kNone);
    EXPECT_EQ(PushStr(reader, col, "def\nok\n"), FramingError::kMessageTooLarge);
    EXPECT_EQ(reader.error_declared_size(), 6u);
    EXPECT_TRUE(col.frames.empty());
    EXPECT_EQ(reader.buffered(), 0u);
  }
  {
    // The pending line sits exactly at the limit, then grows without a newline.
    FrameReader reader(WireFormat::kJson, 5);
    Collector col;
    ASSERT_EQ(PushStr(reader, col, "abcde"), FramingError::kNone);
    EXPECT_EQ(reader.buffered(), 5u);
    EXPECT_EQ(PushStr(reader, col, "f"), FramingError::kMessageTooLarge);
    EXPECT_EQ(reader.error_declared_size(), 6u);
    EXPECT_EQ(PushStr(reader, col, "\n"), FramingError::kMessageTooLarge);
    EXPECT_TRUE(col.frames.empty());
  }
  {
    // A line that starts after complete lines in the same chunk and is too
    // long for the limit on its own, without a newline.
    FrameReader reader(WireFormat::kJson, 5);
    Collector col;
    EXPECT_EQ(PushStr(reader, col, "a\nb\nlonger"), FramingError::kMessageTooLarge);
    EXPECT_EQ(col.frames.size(), 2u);
  }
}

TEST(FrameReader, JsonUnboundedLimitSplitsLines) {
  FrameReader reader(WireFormat::kJson, std::numeric_limits<size_t>::max());
  Collector col;
  ASSERT_EQ(PushStr(reader, col, "one\ntwo\nthr"), FramingError::kNone);
  ASSERT_EQ(PushStr(reader, col, "ee\n"), FramingError::kNone);
  ASSERT_EQ(col.frames.size(), 3u);
  EXPECT_EQ(col.frames[0].payload, "one");
  EXPECT_EQ(col.frames[1].payload, "two");
  EXPECT_EQ(col.frames[2].payload, "three");
}

// ---- FrameReader: buffered() -------------------------------------------------

TEST(FrameReader, BufferedCountsHeaderForAdvanced) {
  FrameReader reader(WireFormat::kAdvanced, 100);
  Collector col;
  const std::string s = Adv("12345") + Adv("ab");
  size_t pos = 0;
  const size_t steps[] = {2, 2, 3, 1, 4};
  const size_t expect_buffered[] = {2, 4, 7, 8, 3};
  for (size_t i = 0; i < 5; i++) {
    ASSERT_EQ(PushChunk(reader, col, U8(s) + pos, steps[i]), FramingError::kNone);
    pos += steps[i];
    EXPECT_EQ(reader.buffered(), expect_buffered[i]) << "step " << i;
  }
  // The last push completed "12345" from the buffer and began the next header.
  ASSERT_EQ(col.frames.size(), 1u);
  ASSERT_EQ(PushChunk(reader, col, U8(s) + pos, s.size() - pos - 1), FramingError::kNone);
  EXPECT_EQ(reader.buffered(), 5u);
  ASSERT_EQ(PushChunk(reader, col, U8(s) + s.size() - 1, 1), FramingError::kNone);
  EXPECT_EQ(reader.buffered(), 0u);
  ASSERT_EQ(col.frames.size(), 2u);
  EXPECT_EQ(col.frames[1].payload, "ab");
}

TEST(FrameReader, BufferedExcludesJsonTerminator) {
  FrameReader reader(WireFormat::kJson, 100);
  Collector col;
  ASSERT_EQ(PushStr(reader, col, "abc"), FramingError::kNone);
  EXPECT_EQ(reader.buffered(), 3u);
  ASSERT_EQ(PushStr(reader, col, "de"), FramingError::kNone);
  EXPECT_EQ(reader.buffered(), 5u);
  ASSERT_EQ(PushStr(reader, col, "\nxy"), FramingError::kNone);
  EXPECT_EQ(reader.buffered(), 2u);
  ASSERT_EQ(col.frames.size(), 1u);
  EXPECT_EQ(col.frames[0].payload, "abcde");
}

// ---- FrameReader: WritableTail / CommitTail --------------------------------

TEST(FrameReader, WritableTailIsEmptyWithoutAKnownLength) {
  {
    FrameReader reader(WireFormat::kAdvanced, 100);
    EXPECT_EQ(reader.WritableTail().data, nullptr);
    EXPECT_EQ(reader.WritableTail().size, 0u);
  }
  {
    // A partial header: the length is not known, so there is nowhere safe to
    // read payload bytes into.
    const std::string s = Adv(Pattern(50));
    for (size_t n = 1; n < 4; n++) {
      FrameReader reader(WireFormat::kAdvanced, 100);
      Collector col;
      ASSERT_EQ(PushChunk(reader, col, U8(s), n), FramingError::kNone);
      FrameReader::Tail t = reader.WritableTail();
      EXPECT_EQ(t.data, nullptr) << n << " header bytes";
      EXPECT_EQ(t.size, 0u) << n << " header bytes";
    }
  }
  {
    FrameReader reader(WireFormat::kJson, 100);
    Collector col;
    ASSERT_EQ(PushStr(reader, col, "partial"), FramingError::kNone);
    EXPECT_EQ(reader.WritableTail().data, nullptr);
  }
}

TEST(FrameReader, WritableTailReadsLargeFrameDirectly) {
  const size_t kSize = 700000;
  const std::string payload = Pattern(kSize, 3);
  const std::string s = Adv(payload) + Adv("after");
  FrameReader reader(WireFormat::kAdvanced, 1 << 20);
  Collector col;
  ASSERT_EQ(PushChunk(reader, col, U8(s), 1004), FramingError::kNone);
  EXPECT_EQ(reader.buffered(), 1004u);

  // The tail grows with the bytes (by doubling, at least 256 KiB at a
  // time), never to the declared size at once, and ends exactly at it.
  size_t at = 1004;
  int tails = 0;
  while (col.frames.empty()) {
    FrameReader::Tail t = reader.WritableTail();
    ASSERT_NE(t.data, nullptr);
    ASSERT_GT(t.size, 0u);
    ASSERT_LE(at + t.size, 4 + kSize);
    // At most two growth steps ahead of the bytes (see WritableTail).
    EXPECT_LE(reader.reserved(), 2 * at + 512 * 1024 + 64);
    const size_t take = std::min<size_t>(t.size, 100000);
    std::memcpy(t.data, s.data() + at, take);
    reader.CommitTail(take, col);
    at += take;
    tails++;
  }
  EXPECT_EQ(at, 4 + kSize);
  EXPECT_GE(tails, 7);
  ASSERT_EQ(col.frames.size(), 1u);
  EXPECT_FALSE(col.frames[0].in_place);
  EXPECT_TRUE(col.frames[0].payload == payload);
  EXPECT_EQ(reader.buffered(), 0u);
  EXPECT_EQ(reader.WritableTail().data, nullptr);

  // Ordinary pushes carry on afterwards.
  ASSERT_EQ(PushChunk(reader, col, U8(s) + 4 + kSize, 9), FramingError::kNone);
  ASSERT_EQ(col.frames.size(), 2u);
  EXPECT_EQ(col.frames[1].payload, "after");
  EXPECT_TRUE(col.frames[1].in_place);
}

TEST(FrameReader, KeepsAWarmReassemblyBufferWhileLargeFramesKeepComing) {
  // Reads of 64 KiB, as a socket delivers them.
  auto push_in_reads = [](FrameReader& reader, Collector& col, const std::string& s) {
    for (size_t at = 0; at < s.size(); at += 65536) {
      const size_t n = std::min<size_t>(65536, s.size() - at);
      ASSERT_EQ(PushChunk(reader, col, U8(s) + at, n), FramingError::kNone);
    }
  };
  const std::string big = Adv(Pattern(1536 * 1024, 5));
  FrameReader reader(WireFormat::kAdvanced, 64u << 20);
  Collector col;
  push_in_reads(reader, col, big);
  ASSERT_EQ(col.frames.size(), 1u);
  EXPECT_FALSE(col.frames[0].in_place);
  // The block that held the frame stays for the next one...
  const size_t kept = reader.reserved();
  EXPECT_GE(kept, big.size());
  push_in_reads(reader, col, big);
  ASSERT_EQ(col.frames.size(), 2u);
  EXPECT_TRUE(col.frames[1].payload == col.frames[0].payload);
  EXPECT_EQ(reader.reserved(), kept);
  // ...until small frames have followed it for a while.
  for (int i = 0; i < 63; i++) push_in_reads(reader, col, Adv("small"));
  EXPECT_EQ(reader.reserved(), kept);
  push_in_reads(reader, col, Adv("small"));
  EXPECT_EQ(reader.reserved(), 0u);
  ASSERT_EQ(col.frames.size(), 66u);

  // A frame above the kept size is given back as soon as it was delivered.
  const std::string huge = Adv(Pattern(5u << 20, 7));
  push_in_reads(reader, col, huge);
  ASSERT_EQ(col.frames.size(), 67u);
  EXPECT_TRUE(col.frames[66].payload == huge.substr(4));
  EXPECT_EQ(reader.reserved(), 0u);
}

TEST(FrameReader, DeclaredLengthIsNeverReservedAhead) {
  // A header declaring almost 256 MiB, then a few bytes: the reader holds
  // about what arrived (the old reader reserved the whole frame, which
  // under an address-space limit became an abort).
  FrameReader reader(WireFormat::kAdvanced, 256u << 20);
  Collector col;
  std::string s = "\x0f\xff\xff\xff" + std::string(1000, 'x');
  ASSERT_EQ(PushStr(reader, col, s), FramingError::kNone);
  EXPECT_EQ(reader.buffered(), s.size());
  EXPECT_LE(reader.reserved(), 4096u);
  for (int i = 0; i < 100; i++) ASSERT_EQ(PushStr(reader, col, std::string(1000, 'y')), FramingError::kNone);
  EXPECT_LE(reader.reserved(), 2 * reader.buffered());
  // The direct-read tail offers a bounded step, not the rest of the frame.
  FrameReader::Tail t = reader.WritableTail();
  ASSERT_NE(t.data, nullptr);
  EXPECT_LE(t.size, 2 * reader.buffered() + 256 * 1024);
}

TEST(FrameReader, LoweringTheLimitFailsAnOversizedBufferedFrame) {
  FrameReader reader(WireFormat::kAdvanced, 1 << 20);
  Collector col;
  ASSERT_EQ(PushStr(reader, col, Adv("ok") + std::string("\x00\x01\x00\x00", 4) + "abc"),
            FramingError::kNone);
  ASSERT_EQ(col.frames.size(), 1u);
  EXPECT_EQ(reader.SetMaxPayloadSize(1024), FramingError::kMessageTooLarge);
  EXPECT_EQ(reader.error_declared_size(), 65536u);
  EXPECT_EQ(reader.buffered(), 0u);
  EXPECT_EQ(PushStr(reader, col, Adv("x")), FramingError::kMessageTooLarge);
  EXPECT_EQ(col.frames.size(), 1u);
}

TEST(FrameReader, LoweringTheLimitKeepsAFittingBufferedFrameAndAppliesToLaterOnes) {
  FrameReader reader(WireFormat::kAdvanced, 1 << 20);
  Collector col;
  const std::string small = Adv(std::string(100, 'a'));
  ASSERT_EQ(PushStr(reader, col, small.substr(0, 50)), FramingError::kNone);
  EXPECT_EQ(reader.SetMaxPayloadSize(100), FramingError::kNone);
  ASSERT_EQ(PushStr(reader, col, small.substr(50)), FramingError::kNone);
  ASSERT_EQ(col.frames.size(), 1u);
  EXPECT_EQ(PushStr(reader, col, Adv(std::string(101, 'b'))), FramingError::kMessageTooLarge);
  // A partial header is not judged until it is whole.
  FrameReader r2(WireFormat::kAdvanced, 1 << 20);
  ASSERT_EQ(PushStr(r2, col, std::string("\x00\x10", 2)), FramingError::kNone);
  EXPECT_EQ(r2.SetMaxPayloadSize(10), FramingError::kNone);
  EXPECT_EQ(PushStr(r2, col, std::string("\x00\x00", 2)), FramingError::kMessageTooLarge);
  // Raising it again restores large frames.
  FrameReader r3(WireFormat::kAdvanced, 10);
  EXPECT_EQ(r3.SetMaxPayloadSize(1 << 20), FramingError::kNone);
  ASSERT_EQ(PushStr(r3, col, Adv(std::string(1000, 'c'))), FramingError::kNone);
}

TEST(FrameReader, LoweringTheLimitUnderAPendingJsonLine) {
  FrameReader reader(WireFormat::kJson, 1 << 20);
  Collector col;
  ASSERT_EQ(PushStr(reader, col, std::string(50, 'x')), FramingError::kNone);
  EXPECT_EQ(reader.SetMaxPayloadSize(40), FramingError::kMessageTooLarge);
  FrameReader ok(WireFormat::kJson, 1 << 20);
  ASSERT_EQ(PushStr(ok, col, std::string(30, 'x')), FramingError::kNone);
  EXPECT_EQ(ok.SetMaxPayloadSize(40), FramingError::kNone);
  ASSERT_EQ(PushStr(ok, col, "y\n"), FramingError::kNone);
  EXPECT_EQ(col.frames.back().payload, std::string(30, 'x') + "y");
}

// A provisional (handshake) limit: Push stops at the first frame over it,
// holding that frame and every byte after it, and ReleaseHeld frames them
// again once the limit was raised, in order, or fails the stream when the
// held frame is still over the limit.
std::vector<std::string> ReleaseAll(FrameReader& r, FramingError* e) {
  std::vector<std::string> got;
  *e = r.ReleaseHeld(
      [&](const FrameReader::Frame& f) { got.emplace_back(reinterpret_cast<const char*>(f.data), f.size); });
  return got;
}

TEST(FrameReader, ProvisionalLimitHoldsAnOverLimitFrameAndWhatFollows) {
  FrameReader reader(WireFormat::kAdvanced, 1 << 20);
  EXPECT_EQ(reader.SetMaxPayloadSize(16, true), FramingError::kNone);
  Collector col;
  const std::string big = std::string(100, 'b');
  const std::string stream = Adv("hello") + Adv(big) + Adv("after") + Adv(big).substr(0, 30);
  ASSERT_EQ(PushStr(reader, col, stream), FramingError::kNone);
  ASSERT_EQ(col.frames.size(), 1u);
  EXPECT_EQ(col.frames[0].payload, "hello");
  EXPECT_TRUE(reader.held());
  EXPECT_EQ(reader.buffered(), stream.size() - Adv("hello").size());
  EXPECT_EQ(reader.SetMaxPayloadSize(1 << 20), FramingError::kNone);
  FramingError e;
  const std::vector<std::string> got = ReleaseAll(reader, &e);
  EXPECT_EQ(e, FramingError::kNone);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], big);
  EXPECT_EQ(got[1], "after");
  EXPECT_FALSE(reader.held());
  // The partial frame at the end stayed pending and completes as usual.
  ASSERT_EQ(PushStr(reader, col, Adv(big).substr(30)), FramingError::kNone);
  EXPECT_EQ(col.frames.back().payload, big);
}

TEST(FrameReader, ProvisionalLimitHoldsAHeaderCompletedAcrossChunks) {
  FrameReader reader(WireFormat::kAdvanced, 1 << 20);
  reader.SetMaxPayloadSize(16, true);
  Collector col;
  const std::string frame = Adv(std::string(40, 'q'));
  ASSERT_EQ(PushStr(reader, col, frame.substr(0, 2)), FramingError::kNone);
  ASSERT_EQ(PushStr(reader, col, frame.substr(2, 10)), FramingError::kNone);
  EXPECT_TRUE(reader.held());
  EXPECT_EQ(reader.buffered(), 12u);
  reader.SetMaxPayloadSize(1 << 20);
  FramingError e;
  EXPECT_TRUE(ReleaseAll(reader, &e).empty());
  EXPECT_EQ(e, FramingError::kNone);
  ASSERT_EQ(PushStr(reader, col, frame.substr(12)), FramingError::kNone);
  EXPECT_EQ(col.frames.back().payload, std::string(40, 'q'));
}

TEST(FrameReader, ProvisionalLimitStillExceededFailsOnRelease) {
  FrameReader reader(WireFormat::kAdvanced, 1 << 20);
  reader.SetMaxPayloadSize(16, true);
  Collector col;
  ASSERT_EQ(PushStr(reader, col, Adv(std::string(100, 'z'))), FramingError::kNone);
  EXPECT_TRUE(reader.held());
  FramingError e;
  EXPECT_TRUE(ReleaseAll(reader, &e).empty());
  EXPECT_EQ(e, FramingError::kMessageTooLarge);
  EXPECT_EQ(reader.error_declared_size(), 100u);
  EXPECT_FALSE(reader.held());
  // A plain (not provisional) limit fails at once, as before.
  FrameReader strict(WireFormat::kAdvanced, 1 << 20);
  strict.SetMaxPayloadSize(16);
  EXPECT_EQ(PushStr(strict, col, Adv(std::string(100, 'z'))), FramingError::kMessageTooLarge);
}

TEST(FrameReader, ProvisionalLimitHoldsJsonLines) {
  FrameReader reader(WireFormat::kJson, 1 << 20);
  reader.SetMaxPayloadSize(8, true);
  Collector col;
  ASSERT_EQ(PushStr(reader, col, "hi\n" + std::string(20, 'l') + "\nyo\npart"), FramingError::kNone);
  ASSERT_EQ(col.frames.size(), 1u);
  EXPECT_TRUE(reader.held());
  reader.SetMaxPayloadSize(1 << 20);
  FramingError e;
  const std::vector<std::string> got = ReleaseAll(reader, &e);
  EXPECT_EQ(e, FramingError::kNone);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], std::string(20, 'l'));
  EXPECT_EQ(got[1], "yo");
  ASSERT_EQ(PushStr(reader, col, "ial\n"), FramingError::kNone);
  EXPECT_EQ(col.frames.back().payload, "partial");
  // A pending line that grows past the limit across chunks is held too.
  FrameReader r2(WireFormat::kJson, 1 << 20);
  r2.SetMaxPayloadSize(8, true);
  ASSERT_EQ(PushStr(r2, col, "abcdef"), FramingError::kNone);
  ASSERT_EQ(PushStr(r2, col, "ghijkl\n"), FramingError::kNone);
  EXPECT_TRUE(r2.held());
  r2.SetMaxPayloadSize(1 << 20);
  const std::vector<std::string> got2 = ReleaseAll(r2, &e);
  ASSERT_EQ(got2.size(), 1u);
  EXPECT_EQ(got2[0], "abcdefghijkl");
}

TEST(FrameReader, WritableTailMixedWithPush) {
  const std::string payload = Pattern(5000, 9);
  const std::string s = Adv(payload) + Adv("next") + Adv("x");
  FrameReader reader(WireFormat::kAdvanced, 1 << 20);
  Collector col;
  ASSERT_EQ(PushChunk(reader, col, U8(s), 4), FramingError::kNone);
  FrameReader::Tail t = reader.WritableTail();
  ASSERT_EQ(t.size, 5000u);
  std::memcpy(t.data, s.data() + 4, 2000);
  reader.CommitTail(2000, col);
  // The rest of the frame and two more arrive in one pushed chunk.
  ASSERT_EQ(PushChunk(reader, col, U8(s) + 2004, s.size() - 2004), FramingError::kNone);
  ASSERT_EQ(col.frames.size(), 3u);
  EXPECT_TRUE(col.frames[0].payload == payload);
  EXPECT_FALSE(col.frames[0].in_place);
  EXPECT_EQ(col.frames[1].payload, "next");
  EXPECT_TRUE(col.frames[1].in_place);
  EXPECT_EQ(col.frames[1].chunk_offset, 3000u + 4);
  EXPECT_EQ(col.frames[2].payload, "x");
  EXPECT_EQ(reader.buffered(), 0u);
}

TEST(FrameReader, WritableTailAfterHeaderOnly) {
  const std::string s = Adv("0123456789");
  FrameReader reader(WireFormat::kAdvanced, 100);
  Collector col;
  ASSERT_EQ(PushChunk(reader, col, U8(s), 4), FramingError::kNone);
  FrameReader::Tail t = reader.WritableTail();
  ASSERT_EQ(t.size, 10u);
  std::memcpy(t.data, "0123456789", 10);
  reader.CommitTail(10, col);
  ASSERT_EQ(col.frames.size(), 1u);
  EXPECT_EQ(col.frames[0].payload, "0123456789");
}

// ---- FrameReader: reassembly memory ----------------------------------------

// Pushes a frame of `size` bytes in two pieces so it is reassembled, and
// returns heap growth while it was pending and after it completed.
struct Growth {
  size_t pending;
  size_t after;
};
Growth ReassembleFrame(FrameReader& reader, size_t size) {
  std::string s = Adv(Pattern(size, 1));
  const size_t base = AllocatedBytes();
  size_t delivered = 0;
  auto visitor = [&](const FrameReader::Frame& f) {
    EXPECT_FALSE(f.in_place);
    delivered = f.size;
  };
  EXPECT_EQ(reader.Push(U8(s), 10, visitor), FramingError::kNone);
  const size_t pending = AllocatedBytes();
  EXPECT_EQ(reader.Push(U8(s) + 10, s.size() - 10, visitor), FramingError::kNone);
  EXPECT_EQ(delivered, size);
  EXPECT_EQ(reader.buffered(), 0u);
  // Drop the test's own copy before measuring.
  std::string().swap(s);
  const size_t after = AllocatedBytes();
  return Growth{pending > base ? pending - base : 0, after > base ? after - base : 0};
}

TEST(FrameReader, LargeReassemblyBufferIsReleased) {
  // Above the 4 MiB a reader keeps for the next large frame.
  const size_t kBig = 6 << 20;
  FrameReader reader(WireFormat::kAdvanced, 16 << 20);
  const size_t base = AllocatedBytes();
  Growth g = ReassembleFrame(reader, kBig);
  // Nothing was reserved for the declared length when the header arrived
  // (memory follows the bytes: 10 of them here)...
  EXPECT_LT(g.pending, size_t{4096});
  // ...and the block the frame grew into was given back once delivered.
  const size_t now = AllocatedBytes();
  EXPECT_LT(now > base ? now - base : 0, size_t{256} << 10);
}

TEST(FrameReader, SmallReassemblyBufferIsRetained) {
  const size_t kSmall = 512 << 10;
  FrameReader reader(WireFormat::kAdvanced, 16 << 20);
  const size_t base = AllocatedBytes();
  ReassembleFrame(reader, kSmall);
  const size_t now = AllocatedBytes();
  // Kept for the next frame rather than reallocated each time.
  EXPECT_GE(now > base ? now - base : 0, kSmall);
  // A second frame of the same size needs no new block.
  Growth g = ReassembleFrame(reader, kSmall);
  EXPECT_LT(g.pending, size_t{64} << 10);
}

}  // namespace
}  // namespace procwire

namespace procwire {
namespace {

// A visitor may take the reassembly block of a frame that spanned chunks and
// keep it (the channel lends it to the decoded views); the reader then starts
// the next frame in a fresh block and keeps framing correctly.
TEST(FrameReaderTakeReassembled, VisitorKeepsTheBlockAndTheStreamGoesOn) {
  FrameReader reader(WireFormat::kAdvanced, 1 << 20);
  std::vector<uint8_t> payload(5000);
  for (size_t i = 0; i < payload.size(); i++) payload[i] = static_cast<uint8_t>(i * 7);
  std::vector<uint8_t> stream(4);
  WriteU32BigEndian(stream.data(), static_cast<uint32_t>(payload.size()));
  stream.insert(stream.end(), payload.begin(), payload.end());
  stream.insert(stream.end(), stream.begin(), stream.end());  // the same frame twice
  std::vector<uint8_t*> taken;
  int frames = 0;
  auto visit = [&](const FrameReader::Frame& f) {
    frames++;
    ASSERT_EQ(f.size, payload.size());
    ASSERT_EQ(0, std::memcmp(f.data, payload.data(), payload.size()));
    if (!f.in_place) {
      size_t offset = 0;
      size_t size = 0;
      uint8_t* block = reader.TakeReassembled(&offset, &size);
      ASSERT_NE(block, nullptr);
      EXPECT_EQ(offset, kAdvancedHeaderSize);
      EXPECT_EQ(size, kAdvancedHeaderSize + payload.size());
      EXPECT_EQ(block + offset, f.data) << "the frame's bytes are the block's";
      taken.push_back(block);
    }
  };
  // Split each frame in two so both are reassembled.
  const size_t half = stream.size() / 4;
  for (size_t pos = 0; pos < stream.size(); pos += half) {
    const size_t n = std::min(half, stream.size() - pos);
    ASSERT_EQ(reader.Push(stream.data() + pos, n, visit), FramingError::kNone);
  }
  EXPECT_EQ(frames, 2);
  EXPECT_EQ(taken.size(), 2u);
  EXPECT_NE(taken[0], taken[1]) << "each frame got its own block";
  EXPECT_EQ(reader.buffered(), 0u);
  for (uint8_t* block : taken) {
    // Still intact after the reader moved on.
    EXPECT_EQ(0, std::memcmp(block + kAdvancedHeaderSize, payload.data(), payload.size()));
    std::free(block);
  }
}

}  // namespace
}  // namespace procwire
