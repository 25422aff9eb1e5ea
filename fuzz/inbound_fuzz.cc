// libFuzzer target for Inbound (src/core/inbound.h): random byte streams,
// framed by FrameReader as the channel's read loop does, interleaved with
// random arrivals of real descriptors (eventfds), ring-record frames, handle
// claims and ends of reads.
//
// Input layout:
//   byte 0: bit 0 accepts segments, bit 1 handles, bit 2 rings; bits 3-4
//           pick the largest payload (16, 300, 64 KiB, 1 MiB).
//   then, until the input ends, one operation per byte (low 3 bits):
//     0: the next byte's low 3 bits descriptors arrive (Receive);
//     1: a chunk of the stream (length: the next byte) is read and framed;
//        each frame goes to OnFrame from the socket; a message frame
//        claims a handle when the frame's first byte is odd;
//     2: a frame from a ring record (length: the next byte, at most 8);
//     3: the read ends (AfterRead with the framer's buffered bytes);
//     4: a handle is claimed directly (TakeHandle);
//     5-7: a segment announcement [0xFE][next byte] or a ring set-up
//        [0xFD][2] is framed and read, with the next byte's low 2 bits
//        descriptors on its first byte, as an honest peer sends them.
//
// Invariants (any break aborts, and libFuzzer keeps the input):
//   - no leak: every descriptor is handed out exactly once or closed by
//     Inbound exactly once; none is left open when Inbound is gone;
//   - a model of the queue agrees with every claim: an announcement takes
//     the oldest n waiting descriptors and its message gets exactly those,
//     a ring set-up the oldest two, a handle the oldest one;
//   - after AfterRead returns ok nothing is pending; errors are sticky.
//
// Build (see scripts/test-native.sh):
//   clang++ -std=c++17 -g -fsanitize=fuzzer,address,undefined -Isrc/core \
//     fuzz/inbound_fuzz.cc src/core/inbound.cc src/core/frame_reader.cc \
//     src/core/socket_io.cc -o inbound_fuzz
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <deque>
#include <set>
#include <vector>

#include "frame_reader.h"
#include "inbound.h"
#include "protocol.h"

namespace {

using procwire::FrameReader;
using procwire::Inbound;
using procwire::WireFormat;

#define FUZZ_CHECK(cond)                                                            \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

constexpr size_t kMaxSizes[4] = {16, 300, 64 * 1024, 1024 * 1024};

// The descriptors the harness made and that are still open, and a model of
// where each is: waiting in the queue, or announced for the next message.
class Ledger final : public procwire::DescriptorCloser {
 public:
  int Make() {
    const int fd = eventfd(0, EFD_CLOEXEC);
    FUZZ_CHECK(fd >= 0);
    FUZZ_CHECK(open_.insert(fd).second);
    return fd;
  }
  bool is_open(int fd) const { return open_.count(fd) == 1; }
  // Inbound closed it: it was open and Inbound held it.
  void Close(int fd) override {
    FUZZ_CHECK(open_.erase(fd) == 1);
    auto p = std::find(pending.begin(), pending.end(), fd);
    auto a = std::find(announced.begin(), announced.end(), fd);
    FUZZ_CHECK(p != pending.end() || a != announced.end() || !modelled_);
    if (p != pending.end()) pending.erase(p);
    if (a != announced.end()) announced.erase(a);
    close(fd);
  }
  // Inbound handed it out: the caller owns (and here closes) it now.
  void HandedOut(int fd) {
    FUZZ_CHECK(open_.erase(fd) == 1);
    close(fd);
  }
  // Received descriptors enter the model once Receive has kept them.
  void set_modelled(bool on) { modelled_ = on; }
  size_t open() const { return open_.size(); }

  std::deque<int> pending;
  std::vector<int> announced;

 private:
  std::set<int> open_;
  bool modelled_ = true;
};

struct Harness {
  Ledger* ledger;
  Inbound* inbound;
  FrameReader* reader;
  bool failed = false;

  void Check(Inbound::Status s) {
    if (failed) FUZZ_CHECK(s == Inbound::Status::kError);
    if (s == Inbound::Status::kError) {
      failed = true;
      FUZZ_CHECK(inbound->error() != procwire::InboundError::kNone);
    }
  }

  void Frame(const uint8_t* data, size_t size, Inbound::Source source) {
    Inbound::Frame out;
    const Inbound::Status s = inbound->OnFrame(data, size, source, &out);
    Check(s);
    if (s != Inbound::Status::kOk) {
      FUZZ_CHECK(out.fds.empty());
      return;
    }
    std::deque<int>& pending = ledger->pending;
    switch (out.kind) {
      case Inbound::FrameKind::kRingSetup:
        FUZZ_CHECK(out.fds.size() == 2 && pending.size() >= 2);
        FUZZ_CHECK(out.fds[0] == pending[0] && out.fds[1] == pending[1]);
        pending.erase(pending.begin(), pending.begin() + 2);
        break;
      case Inbound::FrameKind::kSegmentAnnouncement: {
        FUZZ_CHECK(out.fds.empty() && ledger->announced.empty());
        FUZZ_CHECK(size == 2 && data[1] >= 1 && data[1] <= procwire::protocol::kMaxSegmentsPerFrame);
        FUZZ_CHECK(pending.size() >= data[1]);
        ledger->announced.assign(pending.begin(), pending.begin() + data[1]);
        pending.erase(pending.begin(), pending.begin() + data[1]);
        FUZZ_CHECK(inbound->announced() == ledger->announced.size());
        break;
      }
      case Inbound::FrameKind::kMessage:
        FUZZ_CHECK(out.fds == ledger->announced);
        ledger->announced.clear();
        break;
    }
    for (int fd : out.fds) ledger->HandedOut(fd);
    FUZZ_CHECK(inbound->pending() == pending.size());
    if (out.kind == Inbound::FrameKind::kMessage && source == Inbound::Source::kSocket && size > 0 &&
        (data[0] & 1)) {
      TakeHandle();
    }
  }

  void TakeHandle() {
    const int fd = inbound->TakeHandle();
    if (fd < 0) return;
    FUZZ_CHECK(!ledger->pending.empty() && ledger->pending.front() == fd);
    ledger->pending.pop_front();
    ledger->HandedOut(fd);
  }

  void Read(const uint8_t* data, size_t size) {
    if (reader->error() != procwire::FramingError::kNone) return;
    // An exactly sized copy, so ASan sees any read past the chunk.
    std::vector<uint8_t> chunk(data, data + size);
    reader->Push(chunk.data(), chunk.size(),
                 [&](const FrameReader::Frame& f) { Frame(f.data, f.size, Inbound::Source::kSocket); });
  }

  void Arrive(size_t n) {
    std::vector<int> fds;
    for (size_t i = 0; i < n; i++) fds.push_back(ledger->Make());
    const std::vector<int> made = fds;
    ledger->set_modelled(false);
    const Inbound::Status s = inbound->Receive(&fds);
    ledger->set_modelled(true);
    FUZZ_CHECK(fds.empty());
    // Those Receive did not close wait, in arrival order.
    for (int fd : made) {
      if (ledger->is_open(fd)) ledger->pending.push_back(fd);
    }
    FUZZ_CHECK(inbound->pending() == ledger->pending.size());
    Check(s);
  }

  void EndRead() {
    const Inbound::Status s = inbound->AfterRead(reader->buffered());
    Check(s);
    if (s == Inbound::Status::kOk) FUZZ_CHECK(inbound->pending() == 0);
    if (s == Inbound::Status::kNeedMore) FUZZ_CHECK(reader->buffered() > 0);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  Ledger ledger;
  {
    const uint8_t flags = data[0];
    FrameReader reader(WireFormat::kAdvanced, kMaxSizes[(flags >> 3) & 3]);
    Inbound inbound(&ledger);
    if (flags & 1) inbound.AcceptSegments();
    if (flags & 2) inbound.AcceptHandles();
    if (flags & 4) inbound.AcceptRings();
    Harness h{&ledger, &inbound, &reader};
    size_t pos = 1;
    auto next = [&]() -> uint8_t { return pos < size ? data[pos++] : 0; };
    while (pos < size) {
      const uint8_t op = next() & 7;
      switch (op) {
        case 0:
          h.Arrive(next() & 7);
          break;
        case 1: {
          const size_t n = next();
          const size_t take = n < size - pos ? n : size - pos;
          h.Read(data + pos, take);
          pos += take;
          break;
        }
        case 2: {
          const size_t n = next() & 7;
          const size_t take = n < size - pos ? n : size - pos;
          std::vector<uint8_t> frame(data + pos, data + pos + take);
          pos += take;
          h.Frame(frame.data(), frame.size(), Inbound::Source::kRing);
          break;
        }
        case 3:
          h.EndRead();
          break;
        case 4:
          h.TakeHandle();
          break;
        default: {
          // A control frame as a peer sends it: descriptors first (they
          // ride on its first byte), then its bytes.
          const uint8_t arg = next();
          const bool ring = op == 7;
          h.Arrive(arg & 3);
          const uint8_t frame[6] = {
              0,
              0,
              0,
              2,
              ring ? procwire::protocol::kRingControlByte : procwire::protocol::kSegmentsControlByte,
              ring ? procwire::protocol::kRingSetupVersion : static_cast<uint8_t>(arg >> 2)};
          h.Read(frame, sizeof(frame));
          break;
        }
      }
    }
    h.EndRead();
  }
  // Inbound is gone: whatever it still held it closed.
  FUZZ_CHECK(ledger.open() == 0);
  return 0;
}
