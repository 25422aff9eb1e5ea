// libFuzzer target for the shared-memory ring (src/core/ring.h), from the
// point of view of one honest end whose peer controls everything in the
// shared mapping: the indices, the record headers and the bytes, and may
// change them between any two calls.
//
// Input layout:
//   byte 0:  bit 0 picks the honest end under test for the start position
//            (0: both ends start at 0; 1: the shared head and tail come from
//            bytes 1-16 before the ends attach).
//   bytes 1-8, 9-16: initial shared head and tail (little-endian), used when
//            bit 0 of byte 0 is set.
//   byte 17: how many bytes of operations follow (N).
//   then:    N bytes of operations (see RunOps).
//   rest:    copied into the data area (up to its size) before the ends
//            attach, so the reader meets arbitrary record headers.
//
// Checks: every record the reader hands out and every region the writer
// reserves lies inside the data area; the reader's tail never moves
// backwards and stays aligned; errors are sticky; the number of records
// read per drain is bounded. A violation aborts, so
// libFuzzer keeps the input as a crash.
//
// Build (see scripts/test-native.sh):
//   clang++ -std=c++17 -g -fsanitize=fuzzer,address,undefined \
//     -Isrc/core fuzz/ring_fuzz.cc src/core/ring.cc -o ring_fuzz
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ring.h"

namespace {

using procwire::RingError;
using procwire::RingMapping;
using procwire::RingReader;
using procwire::RingStatus;
using procwire::RingWriter;

#define FUZZ_CHECK(cond)                                                            \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

// A small ring makes wraps and every edge reachable from short inputs.
constexpr size_t kCapacity = 4096;

uint64_t Le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

// One mapping for the whole run: making a memfd per input would dominate
// the time. Each input resets it.
RingMapping& Mapping() {
  static RingMapping* m = [] {
    auto* r = new RingMapping();
    if (r->Create(kCapacity) != 0) {
      std::fprintf(stderr, "ring_fuzz: cannot create a ring\n");
      std::abort();
    }
    return r;
  }();
  return *m;
}

bool InData(const RingMapping& m, const uint8_t* p, size_t n) {
  return p >= m.data() && n <= m.capacity() && static_cast<size_t>(p - m.data()) <= m.capacity() - n;
}

struct Harness {
  RingMapping& m;
  RingReader reader;
  RingWriter writer;
  std::vector<uint8_t> copy;
  uint64_t last_tail;
  RingError reader_error = RingError::kNone;

  explicit Harness(RingMapping& mapping)
      : m(mapping), reader(&mapping), writer(&mapping), last_tail(reader.tail()) {}

  void CheckReader(RingStatus s) {
    FUZZ_CHECK(reader.tail() >= last_tail);
    FUZZ_CHECK(reader.tail() % 8 == 0);
    last_tail = reader.tail();
    if (reader_error != RingError::kNone) {
      // Sticky: the same error, every time.
      FUZZ_CHECK(s == RingStatus::kError);
      FUZZ_CHECK(reader.error() == reader_error);
    }
    if (s == RingStatus::kError) {
      FUZZ_CHECK(reader.error() == RingError::kBadIndex || reader.error() == RingError::kBadRecord);
      reader_error = reader.error();
    }
  }

  // Reads until empty or failed; at most a ring's worth of records can
  // come out of one drain (plus a wrap).
  void Drain() {
    const size_t bound = kCapacity / procwire::kRingRecordHeaderSize + 2;
    for (size_t i = 0; i <= bound; i++) {
      const uint8_t* d = nullptr;
      size_t n = 0;
      const RingStatus s = reader.Peek(&d, &n);
      CheckReader(s);
      if (s != RingStatus::kOk) return;
      FUZZ_CHECK(InData(m, d, n));
      FUZZ_CHECK(n <= procwire::RingMaxRecordPayload(kCapacity));
      // Touch every byte, as a caller copying the record out would.
      copy.assign(d, d + n);
      reader.Consume();
      CheckReader(RingStatus::kOk);
    }
    std::fprintf(stderr, "ring_fuzz: a drain returned more records than the ring holds\n");
    std::abort();
  }

  void Write(size_t size) {
    uint8_t* out = nullptr;
    // kTooLarge is not sticky; any other writer error is.
    const RingError before = writer.error();
    const bool sticky = before != RingError::kNone && before != RingError::kTooLarge;
    const RingStatus s = writer.Reserve(size, &out);
    if (sticky) {
      FUZZ_CHECK(s == RingStatus::kError);
      FUZZ_CHECK(writer.error() == before);
      return;
    }
    if (s == RingStatus::kOk) {
      FUZZ_CHECK(InData(m, out, size));
      std::memset(out, 0xab, size);
      writer.Commit(size);
    } else if (s == RingStatus::kError) {
      FUZZ_CHECK(writer.error() != RingError::kNone);
      if (size > writer.max_payload()) FUZZ_CHECK(writer.error() == RingError::kTooLarge);
    }
  }
};

// Operations, each one byte (some take argument bytes after it):
//   0 read everything available          1 honest write of (arg * 17) bytes
//   2 set shared head to 8 arg bytes      3 set shared tail to 8 arg bytes
//   4 move shared head by (arg - 128) * 8 5 write 8 arg bytes at data offset
//                                           (2 arg bytes, low 12 bits, x8)
//   6 reader sleep handshake              7 writer sleep handshake + wakes
// Missing argument bytes read as zero.
void RunOps(Harness& h, const uint8_t* ops, size_t n) {
  size_t i = 0;
  auto arg = [&](size_t k) {
    uint8_t buf[8] = {0};
    for (size_t j = 0; j < k && i < n; j++) buf[j] = ops[i++];
    return Le64(buf);
  };
  while (i < n) {
    const uint8_t op = ops[i++] & 7;
    switch (op) {
      case 0:
        h.Drain();
        break;
      case 1:
        h.Write(static_cast<size_t>(arg(1)) * 17);
        break;
      case 2:
        h.m.header()->head.store(arg(8), std::memory_order_relaxed);
        break;
      case 3:
        h.m.header()->tail.store(arg(8), std::memory_order_relaxed);
        break;
      case 4: {
        const int64_t delta = (static_cast<int64_t>(arg(1)) - 128) * 8;
        h.m.header()->head.fetch_add(static_cast<uint64_t>(delta), std::memory_order_relaxed);
        break;
      }
      case 5: {
        const size_t at = (static_cast<size_t>(arg(2)) & 0x1ff) * 8;
        const uint64_t v = arg(8);
        std::memcpy(h.m.data() + at, &v, 8);
        break;
      }
      case 6:
        if (h.reader.PrepareToSleep()) h.reader.DoneSleeping();
        h.CheckReader(h.reader_error != RingError::kNone ? RingStatus::kError : RingStatus::kOk);
        break;
      default:
        if (h.writer.PrepareToSleep(static_cast<size_t>(arg(1)) * 17)) h.writer.DoneSleeping();
        (void)h.writer.NeedsWake();
        (void)h.reader.NeedsWake();
        break;
    }
  }
  h.Drain();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 18) return 0;
  RingMapping& m = Mapping();
  procwire::RingHeader* hdr = m.header();
  std::memset(m.data(), 0, m.capacity());
  const bool custom_start = (data[0] & 1) != 0;
  hdr->head.store(custom_start ? Le64(data + 1) : 0);
  hdr->tail.store(custom_start ? Le64(data + 9) : 0);
  hdr->consumer_sleeping.store(0);
  hdr->producer_sleeping.store(0);
  size_t ops_size = data[17];
  size_t pos = 18;
  if (ops_size > size - pos) ops_size = size - pos;
  const uint8_t* ops = data + pos;
  pos += ops_size;
  const size_t fill = size - pos < m.capacity() ? size - pos : m.capacity();
  std::memcpy(m.data(), data + pos, fill);

  Harness h(m);
  if (h.reader.error() != RingError::kNone) {
    // A start the reader rejects: it must stay rejected.
    h.reader_error = h.reader.error();
  }
  RunOps(h, ops, ops_size);
  return 0;
}
