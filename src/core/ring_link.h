// RingLink: the shared-memory half of a channel between two procwire
// ends on one host (see docs/rings.md and docs/protocol.md, "Rings").
//
// Each direction has its own single-producer/single-consumer ring
// (src/core/ring.h), created by the writing end, and its own wake-up link
// (src/core/wake.h), created by the reading end: the side that waits on a
// descriptor is the side that made it. Each end's ring set-up control frame
// carries, with SCM_RIGHTS, the memfd of the ring it writes and the
// signalling end of the link for the ring it reads. A writer uses its ring
// only once it has read the peer's set-up, which brings the link it signals:
// before that its frames go by the socket, so a reader that holds its own
// set-up back (a server until the hello is done) still sees them. The socket stays open beside the rings: it
// carries what a ring cannot (descriptors, frames larger than a record, anything sent while earlier socket
// bytes are still queued) and remains the liveness signal.
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
// the set-up frame can carry a copy), our link's two ends (the signalling
// one kept for wake-ups of our own) and the peer's signalling end. No V8, no
// libuv: the channel polls inbound_wake_fd() itself. Threading: the channel's thread.
#ifndef PROCWIRE_CORE_RING_LINK_H_
#define PROCWIRE_CORE_RING_LINK_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ring.h"
#include "wake.h"

namespace procwire {

// The data area of each ring. Frames up to RingMaxRecordPayload(capacity)
// less the mark take the ring; bigger ones the socket.
constexpr size_t kChannelRingCapacity = 1024 * 1024;
// Bytes before the frames in every ring record: the socket mark.
constexpr size_t kRingMarkSize = 8;
// In a batch of sends, a sleeping reader is woken early after every this
// many records (see RingLink::Write).
constexpr uint32_t kEarlyWakeRecords = 16;
// Reads of 256 bytes one wake-up spends emptying its link. An honest writer
// sends at most one byte per sleep the reader announced.
constexpr int kMaxWakeDrainReads = 4;
// Wake-ups in a row without a record before the link counts as abused: the
// writer signals only after writing a record to a reader that announced
// sleep, and our own wake-ups reset the count, so an honest peer never
// comes near it.
constexpr uint32_t kMaxIdleWakes = 64;

class RingLink {
 public:
  RingLink() = default;
  ~RingLink();
  RingLink(const RingLink&) = delete;
  RingLink& operator=(const RingLink&) = delete;

  // ---- the outbound direction (we write) ----
  // Creates our ring, and our inbound wake-up link unless it exists.
  // Returns 0 or -errno.
  int CreateOutbound(size_t capacity);
  // Close-on-exec copies of our ring's memfd and of our link's signalling
  // end, for the set-up frame's SCM_RIGHTS (the write queue closes them once
  // sent). Returns 0 or -errno.
  int DupSetupFds(int* ring_fd, int* wake_fd) const;
  // Takes the signalling end of the peer's link, from its set-up frame
  // (closed on failure too), and wakes the reader if records wait for it.
  // Returns 0, -EPROTO when it is not a unix stream socket, or -EALREADY.
  int TakePeerWake(int wake_fd);
  // The largest frame (or batch of frames) one record can take.
  size_t max_frame_bytes() const;
  // Writes one record: the mark, then `size` bytes of whole frames. False
  // before the reader's link arrived (TakePeerWake), when the ring has no
  // room now or the frames are too large for a record (send them by the
  // socket instead); a failed ring is reported by outbound_failed().
  bool Write(uint64_t socket_mark, const uint8_t* frames, size_t size);
  // After a batch of writes: signals the reader when it announced sleep
  // (once we have its link).
  void WakeReaderIfNeeded();
  bool outbound_failed() const {
    return writer_ != nullptr && writer_->error() != RingError::kNone &&
           writer_->error() != RingError::kTooLarge;
  }

  // ---- the inbound direction (the peer writes) ----
  // Maps the peer's ring and creates our inbound wake-up link unless it
  // exists. `ring_fd` is borrowed. Returns 0, -EPROTO for a ring that is not
  // valid, -EALREADY when one is attached already, or -errno.
  int AttachInbound(int ring_fd);
  bool has_inbound() const { return reader_ != nullptr; }
  // The end of our link the channel polls.
  int inbound_wake_fd() const { return in_wake_fd_; }
  // Makes the poll of inbound_wake_fd() fire once more (after a budget, on
  // readStart): through our own copy of the signalling end.
  void WakeSelf() {
    WakeLinkSignal(in_signal_fd_);
    idle_wakes_ = 0;
  }
  // At the start of a wake-up: empties the link. False when the link cannot
  // be trusted any more (set corrupt_reason()): it was shut down (it would
  // stay readable), or it keeps being signalled with no record to read
  // (kMaxIdleWakes wake-ups in a row; reading a record resets the count).
  bool DrainWake();

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
  int CreateInboundWake();

  RingMapping out_map_;
  std::unique_ptr<RingWriter> writer_;
  // The signalling end of the peer's link.
  int out_wake_fd_ = -1;
  bool out_dirty_ = false;
  // Records written since the last end-of-batch wake-up check.
  uint32_t batch_records_ = 0;

  RingMapping in_map_;
  std::unique_ptr<RingReader> reader_;
  // Our link: the end we poll, and our copy of the end the peer signals.
  int in_wake_fd_ = -1;
  int in_signal_fd_ = -1;
  // Wake-ups in a row that found no record to deliver.
  uint32_t idle_wakes_ = 0;
  uint64_t last_mark_ = 0;
  std::vector<uint8_t> scratch_;
  const char* corrupt_reason_ = nullptr;
};

}  // namespace procwire

#endif  // PROCWIRE_CORE_RING_LINK_H_
