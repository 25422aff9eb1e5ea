// RingTransport: the shared-memory half of a channel between two procwire
// ends on one host (see docs/rings.md and docs/protocol.md, "Rings").
//
// Each direction has its own single-producer/single-consumer ring
// (src/core/ring.h) and its own eventfd, both created by the writing end and
// passed to the reading end with SCM_RIGHTS beside a ring set-up control
// frame on the socket. The socket stays open beside the rings: it carries
// what a ring cannot (descriptors, frames larger than a record, anything sent
// while earlier socket bytes are still queued) and remains the liveness
// signal.
//
// Ordering: every ring record starts with a u64 socket mark, the number of
// bytes the writer had queued on the socket when it wrote the record. The
// reader delivers a socket frame that starts at socket offset X only after
// every ring record whose mark is <= X, and a ring record with mark S only
// after every socket frame that starts before S. Both sides thus see one
// order, the writer's.
//
// Wake-ups: the writer signals the reader's eventfd only when the reader
// announced it is going to sleep (RingReader::PrepareToSleep), once per batch
// of records. The writer never waits for ring space: a frame that does not
// fit goes by the socket instead (the marks keep the order), so backpressure
// is the socket's, exactly as without rings.
//
// Ownership: this object owns both mappings, the outbound memfd (kept open so
// the set-up frame can carry a copy) and both eventfds. No V8, no libuv: the
// channel polls inbound_wake_fd() itself. Threading: the channel's thread.
#ifndef PROCWIRE_BINDING_RING_TRANSPORT_H_
#define PROCWIRE_BINDING_RING_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "../core/ring.h"

namespace procwire {

// The data area of each ring. Frames up to RingMaxRecordPayload(capacity)
// less the mark take the ring; bigger ones the socket.
constexpr size_t kChannelRingCapacity = 1024 * 1024;
// Bytes before the frames in every ring record: the socket mark.
constexpr size_t kRingMarkSize = 8;
// In a batch of sends, a sleeping reader is woken early after every this
// many records (see RingTransport::Write).
constexpr uint32_t kEarlyWakeRecords = 16;

class RingTransport {
 public:
  RingTransport() = default;
  ~RingTransport();
  RingTransport(const RingTransport&) = delete;
  RingTransport& operator=(const RingTransport&) = delete;

  // ---- the outbound direction (we write) ----
  // Creates our ring and its eventfd. Returns 0 or -errno.
  int CreateOutbound(size_t capacity);
  bool has_outbound() const { return writer_ != nullptr; }
  // Close-on-exec copies of the ring's memfd and eventfd, for SCM_RIGHTS
  // (the write queue closes them once sent). Returns 0 or -errno.
  int DupOutboundFds(int* ring_fd, int* wake_fd) const;
  // The largest frame (or batch of frames) one record can take.
  size_t max_frame_bytes() const;
  // Writes one record: the mark, then `size` bytes of whole frames. False
  // when the ring has no room now or the frames are too large for a record
  // (send them by the socket instead); a failed ring is reported by
  // outbound_failed().
  bool Write(uint64_t socket_mark, const uint8_t* frames, size_t size);
  // After a batch of writes: signals the reader when it announced sleep.
  void WakeReaderIfNeeded();
  bool outbound_failed() const {
    return writer_ != nullptr && writer_->error() != RingError::kNone &&
           writer_->error() != RingError::kTooLarge;
  }

  // ---- the inbound direction (the peer writes) ----
  // Maps the peer's ring and takes ownership of its eventfd (closed on
  // failure too). `ring_fd` is borrowed. Returns 0, -EPROTO for a ring that
  // is not valid, -EALREADY when one is attached already, or -errno.
  int AttachInbound(int ring_fd, int wake_fd);
  bool has_inbound() const { return reader_ != nullptr; }
  int inbound_wake_fd() const { return in_wake_fd_; }

  enum class ReadStatus : uint8_t {
    kRecord,   // *frames/*size: a private copy of the record's frames.
    kEmpty,    // Nothing published.
    kWaiting,  // The next record's mark is past the socket bytes delivered.
    kCorrupt,  // The peer broke the ring (see corrupt_reason()).
  };
  // The next record whose mark is <= socket_delivered, copied out of the
  // shared mapping (so a peer changing bytes later cannot affect decoding)
  // and consumed.
  ReadStatus Read(uint64_t socket_delivered, const uint8_t** frames, size_t* size);
  // With the ring found empty: announce sleep. False when data arrived
  // meanwhile (read again).
  bool PrepareToSleep();
  void DoneSleeping();
  // A cheap hint for a spinning reader: the peer published something.
  bool InboundMaybeReady() const { return reader_ != nullptr && reader_->MaybeHasData(); }
  // How long the reader spins before it sleeps (see SpinWindow), and when
  // it last found the ring empty (MonotonicNs; 0: not since a delivery).
  SpinWindow spin;
  uint64_t empty_since_ns = 0;
  // After a sleep that began at empty_since_ns: how long the ring stayed
  // empty, by the writer's wake-up stamp. A stamp outside [empty_since_ns,
  // now] (stale: a wake-up of our own, such as readStart's; or a lying peer)
  // counts the whole time asleep.
  uint64_t WokenGapNs(uint64_t now) const {
    const uint64_t woken = reader_ != nullptr ? reader_->WokenNs() : 0;
    if (woken < empty_since_ns || woken > now) return now - empty_since_ns;
    return woken - empty_since_ns;
  }
  const char* corrupt_reason() const { return corrupt_reason_; }
  void SetCorrupt(const char* why) { corrupt_reason_ = why; }

  // Counters for stats().
  double messages_out = 0;
  double messages_in = 0;
  // eventfd signals sent to a sleeping reader.
  double wakes_sent = 0;

 private:
  RingMapping out_map_;
  std::unique_ptr<RingWriter> writer_;
  int out_wake_fd_ = -1;
  bool out_dirty_ = false;
  // Records written since the last end-of-batch wake-up check.
  uint32_t batch_records_ = 0;

  RingMapping in_map_;
  std::unique_ptr<RingReader> reader_;
  int in_wake_fd_ = -1;
  uint64_t last_mark_ = 0;
  std::vector<uint8_t> scratch_;
  const char* corrupt_reason_ = nullptr;
};

}  // namespace procwire

#endif  // PROCWIRE_BINDING_RING_TRANSPORT_H_
