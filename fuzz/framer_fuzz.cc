// libFuzzer target for FrameReader (src/core/frame_reader.h).
//
// Input layout:
//   byte 0: bit 0 picks the format (0 advanced, 1 json); bits 1-3 pick the
//           maximum payload size from kMaxSizes (json: 7 is unlimited); bit 4 makes the harness
//           read into WritableTail() whenever the reader offers one, as the
//           binding does for large frames; bit 5 lowers the maximum after
//           the first chunk (SetMaxPayloadSize, as the hello does) to
//           kMaxSizes[bits 6-7], and only the invariants are checked then.
//   byte 1: how many chunk lengths follow (low 4 bits).
//   then:   that many bytes, each the length of the next chunk (0 allowed);
//           whatever stream is left after them forms the last chunk.
//   rest:   the stream.
//
// Each chunk is copied into its own exactly sized heap block, so ASan
// catches any read past the end of a chunk, not only past the whole input.
// The frames are checked against an independent whole-stream parse, so a
// split that changes the result is a failure even when nothing crashes.
//
// Build (see scripts/test-native.sh):
//   clang++ -std=c++17 -g -fsanitize=fuzzer,address,undefined \
//     -Isrc/core fuzz/framer_fuzz.cc src/core/frame_reader.cc src/core/v8_scan.cc -o framer_fuzz
//
// Every delivered frame is also given to the V8 payload scan
// (src/core/v8_scan.h), which procwire runs on untrusted payloads before
// V8 decodes them: it must never read out of bounds, and a limit of
// UINT64_MAX can never be exceeded.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "frame_reader.h"
#include "v8_scan.h"

namespace {

using procwire::FrameReader;
using procwire::FramingError;
using procwire::WireFormat;

// Small limits make size errors reachable from short inputs. The largest is
// 1 GiB: the reader must never allocate for a declared length ahead of the
// bytes (the fuzzer's malloc limit would report that as a crash, and the
// reserved() check below as a failure). For json the last entry means "no
// limit" (SIZE_MAX), the edge where max + 1 overflows.
constexpr size_t kMaxSizes[8] = {0, 1, 2, 5, 16, 100, 4096, size_t{1} << 30};
// What the reader may hold beyond twice the bytes fed: two tail growths and
// ByteBuffer's first block.
constexpr size_t kSlack = 512 * 1024 + 64;

// Aborts with a message; libFuzzer then saves the input as a crash.
#define FUZZ_CHECK(cond)                                                            \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

struct Expected {
  std::vector<std::string> frames;
  bool error = false;
  // For advanced: the length in the offending header.
  uint64_t declared = 0;
  // Bytes after the last complete frame when there is no error.
  size_t tail = 0;
};

// The reference: frames of the whole stream parsed in one go, written as
// plainly as possible and sharing no code with FrameReader.
Expected Reference(WireFormat format, size_t max, const uint8_t* s, size_t n) {
  Expected e;
  size_t pos = 0;
  if (format == WireFormat::kAdvanced) {
    while (n - pos >= 4) {
      const uint64_t len = (uint64_t{s[pos]} << 24) | (uint64_t{s[pos + 1]} << 16) |
                           (uint64_t{s[pos + 2]} << 8) | uint64_t{s[pos + 3]};
      if (len > max) {
        e.error = true;
        e.declared = len;
        return e;
      }
      if (n - pos - 4 < len) break;
      e.frames.emplace_back(reinterpret_cast<const char*>(s + pos + 4), static_cast<size_t>(len));
      pos += 4 + static_cast<size_t>(len);
    }
  } else {
    for (;;) {
      size_t end = pos;
      while (end < n && s[end] != '\n') end++;
      if (end - pos > max) {
        e.error = true;
        return e;
      }
      if (end == n) break;
      e.frames.emplace_back(reinterpret_cast<const char*>(s + pos), end - pos);
      pos = end + 1;
    }
  }
  e.tail = n - pos;
  return e;
}

struct State {
  size_t max = 0;
  std::vector<std::string> frames;
  size_t delivered_bytes = 0;
  // The chunk being pushed, for checking in-place frames.
  const uint8_t* chunk = nullptr;
  size_t chunk_size = 0;
  bool expect_in_place_allowed = true;
};

void OnFrame(State& st, const FrameReader::Frame& f) {
  FUZZ_CHECK(f.size <= st.max);
  if (f.in_place) {
    FUZZ_CHECK(st.expect_in_place_allowed);
    FUZZ_CHECK(f.chunk_offset <= st.chunk_size);
    FUZZ_CHECK(f.size <= st.chunk_size - f.chunk_offset);
    FUZZ_CHECK(f.data == st.chunk + f.chunk_offset);
  } else {
    FUZZ_CHECK(f.chunk_offset == 0);
  }
  FUZZ_CHECK(f.size == 0 || f.data != nullptr);
  FUZZ_CHECK(procwire::ScanForOversizedBuffers(f.data, f.size, UINT64_MAX) !=
             procwire::ScanResult::kTooLarge);
  (void)procwire::ScanForOversizedBuffers(f.data, f.size, 0);
  st.frames.emplace_back(reinterpret_cast<const char*>(f.data), f.size);
  st.delivered_bytes += f.size;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const WireFormat format = (data[0] & 1) ? WireFormat::kJson : WireFormat::kAdvanced;
  const size_t max_index = (data[0] >> 1) & 7;
  const size_t max = format == WireFormat::kJson && max_index == 7 ? SIZE_MAX : kMaxSizes[max_index];
  const bool use_tail = (data[0] & 0x10) != 0;
  const bool lower = (data[0] & 0x20) != 0;
  const size_t lowered = kMaxSizes[(data[0] >> 6) & 3];
  size_t splits = data[1] & 15;
  size_t pos = 2;
  if (splits > size - pos) splits = size - pos;
  const uint8_t* lengths = data + pos;
  pos += splits;
  const uint8_t* stream = data + pos;
  const size_t stream_size = size - pos;

  std::vector<size_t> chunks;
  size_t left = stream_size;
  for (size_t i = 0; i < splits; i++) {
    const size_t n = lengths[i] < left ? lengths[i] : left;
    chunks.push_back(n);
    left -= n;
  }
  chunks.push_back(left);

  FrameReader reader(format, max);
  State st;
  st.max = max;
  auto visitor = [&st](const FrameReader::Frame& f) { OnFrame(st, f); };
  size_t fed = 0;
  FramingError err = FramingError::kNone;
  uint64_t declared_at_error = 0;

  size_t offset = 0;
  bool first = true;
  for (size_t n : chunks) {
    if (lower && !first && st.max != lowered) {
      // As the hello does: the limit drops under a possibly buffered frame.
      const size_t before = reader.buffered();
      const FramingError r = reader.SetMaxPayloadSize(lowered);
      st.max = lowered;
      FUZZ_CHECK(r == reader.error());
      if (err == FramingError::kNone && r != FramingError::kNone) {
        FUZZ_CHECK(r == FramingError::kMessageTooLarge);
        FUZZ_CHECK(before > 0);
        FUZZ_CHECK(reader.buffered() == 0);
        FUZZ_CHECK(reader.error_declared_size() > lowered);
        err = r;
        declared_at_error = reader.error_declared_size();
      }
    }
    first = false;
    // An exactly sized copy: any read past the chunk is a heap overflow.
    uint8_t* chunk = static_cast<uint8_t*>(std::malloc(n == 0 ? 1 : n));
    FUZZ_CHECK(chunk != nullptr);
    std::memcpy(chunk, stream + offset, n);
    offset += n;
    size_t used = 0;

    if (err == FramingError::kNone && use_tail) {
      FrameReader::Tail t = reader.WritableTail();
      if (t.data != nullptr) {
        FUZZ_CHECK(format == WireFormat::kAdvanced);
        FUZZ_CHECK(t.size > 0);
        FUZZ_CHECK(reader.buffered() >= 4);
        FUZZ_CHECK(reader.buffered() + t.size <= 4 + st.max);
        const size_t take = n < t.size ? n : t.size;
        std::memcpy(t.data, chunk, take);
        st.chunk = nullptr;
        st.chunk_size = 0;
        st.expect_in_place_allowed = false;
        reader.CommitTail(take, visitor);
        used = take;
        fed += take;
        FUZZ_CHECK(st.delivered_bytes + reader.buffered() <= fed);
      }
    }

    const size_t frames_before = st.frames.size();
    st.chunk = chunk + used;
    st.chunk_size = n - used;
    st.expect_in_place_allowed = true;
    const FramingError r = reader.Push(chunk + used, n - used, visitor);
    fed += n - used;
    std::free(chunk);

    FUZZ_CHECK(r == reader.error());
    FUZZ_CHECK(st.delivered_bytes + reader.buffered() <= fed);
    // Memory follows the bytes that arrived, never the declared length.
    FUZZ_CHECK(reader.reserved() <= 2 * fed + kSlack);
    if (err != FramingError::kNone) {
      // Sticky: the same error, nothing delivered, nothing buffered.
      FUZZ_CHECK(r == err);
      FUZZ_CHECK(st.frames.size() == frames_before);
      FUZZ_CHECK(reader.error_declared_size() == declared_at_error);
    } else if (r != FramingError::kNone) {
      FUZZ_CHECK(r == FramingError::kMessageTooLarge);
      err = r;
      declared_at_error = reader.error_declared_size();
      FUZZ_CHECK(declared_at_error > st.max);
    }
    if (err != FramingError::kNone) {
      FUZZ_CHECK(reader.buffered() == 0);
      FUZZ_CHECK(reader.WritableTail().data == nullptr);
    }
  }

  // Once failed, a further push changes nothing.
  if (err != FramingError::kNone) {
    const uint8_t more[5] = {0, 0, 0, 0, '\n'};
    const size_t frames_before = st.frames.size();
    FUZZ_CHECK(reader.Push(more, sizeof(more), visitor) == err);
    FUZZ_CHECK(st.frames.size() == frames_before);
  }

  // With the limit changed mid-stream the one-limit reference does not
  // apply; the invariants above were the test.
  if (lower) return 0;
  const Expected e = Reference(format, max, stream, stream_size);
  FUZZ_CHECK(e.error == (err != FramingError::kNone));
  FUZZ_CHECK(st.frames.size() == e.frames.size());
  for (size_t i = 0; i < e.frames.size(); i++) FUZZ_CHECK(st.frames[i] == e.frames[i]);
  if (e.error) {
    if (format == WireFormat::kAdvanced) FUZZ_CHECK(declared_at_error == e.declared);
  } else {
    FUZZ_CHECK(reader.buffered() == e.tail);
  }
  return 0;
}
