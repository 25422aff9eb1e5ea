// A single-producer/single-consumer byte ring in a shared memfd, for moving
// procwire frames between two processes on one host without system calls.
//
// Layout of the shared memory (one memfd, mapped MAP_SHARED by both ends):
//   [0, kRingHeaderSize)          header page: constants (magic, version,
//                                 capacity), then head, tail and the two
//                                 sleep words, each on its own cache line so
//                                 the two sides never write the same line;
//   [kRingHeaderSize, + capacity) data area, capacity a power of two.
//
// The data area holds records. A record is an 8-byte header (u32 length,
// u32 kind, host byte order: both ends are on one host) and `length` bytes,
// padded to a multiple of 8. A data record carries bytes in the channel's
// wire format: one or more whole frames, exactly as they would go on the
// socket, so the reader hands them to the same FrameReader. A record never
// wraps: when it does not fit before the end of the data area the writer
// first writes a wrap record that fills the rest, and the reader skips it.
// head and tail count bytes since creation (64 bits never overflow in
// practice); their offset in the data area is the count modulo capacity.
//
// Publication: the writer fills a record and only then stores head with
// release order, so a reader never sees a partly written record, even when
// the writer is killed in the middle (the record simply never appears).
//
// Trust: the peer shares this memory and may scribble over all of it. Each
// end therefore keeps its own position (the writer its head, the reader its
// tail) and the capacity in private memory, and only ever reads the other
// side's index and the record headers from the ring, validating every value
// it reads before using it: an impossible index or record makes that end fail
// with a sticky RingError, never access outside the mapping, and never loop
// (a read takes at most two records: a wrap, then data). Record bytes may
// still change under the reader after Peek; the caller copies a record out
// (or parses it with code that tolerates any bytes) before trusting it. The
// memfd is sealed against shrinking and growing, so the peer cannot make our
// accesses fault (SIGBUS) by truncating it.
//
// Wake-ups: a reader that finds the ring empty announces that it is going to
// sleep (stores 1 in the consumer sleep word), then issues a full fence and
// checks the ring again, and sleeps only if it is still empty. A writer
// publishes head, issues a full fence, and signals only if it then finds the
// sleep word set (exchanging it back to 0, so one sleep costs one signal).
// Either the reader's re-check sees the new head or the writer sees the
// announcement: no wake-up is lost. A full writer waits for space the same
// way with the producer sleep word. The signal itself is the caller's: a
// channel's event loop uses a wake-up link its reader made (src/core/wake.h).
//
// Ownership and lifetime: RingMapping owns one mapping (and, when it created
// the ring, the memfd until the caller takes it). RingWriter and RingReader
// borrow a mapping, which must outlive them. Threading: one RingWriter and
// one RingReader per ring, each used by one thread at a time (they may be in
// different processes); nothing here locks.
#ifndef PROCWIRE_CORE_RING_H_
#define PROCWIRE_CORE_RING_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace procwire {

constexpr uint64_t kRingMagic = 0x676e697277636f72ull;  // "rocwring", little-endian
constexpr uint32_t kRingVersion = 1;
constexpr size_t kRingHeaderSize = 4096;
constexpr size_t kRingRecordHeaderSize = 8;
// Bounds on the data area: a few records at least, and small enough that a
// 32-bit record length can describe any record.
constexpr size_t kRingMinCapacity = 4096;
constexpr size_t kRingMaxCapacity = size_t{1} << 30;

enum class RingRecordKind : uint32_t { kData = 0x44415441, kWrap = 0x57524150 };

// The header page as it lies in shared memory. Only the constants are
// written before the other side attaches; afterwards each index and sleep
// word has exactly one writer, except the sleep words, which the waking side
// exchanges back to 0.
struct RingHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t reserved0;
  uint64_t capacity;
  alignas(64) std::atomic<uint64_t> head;  // written by the producer
  alignas(64) std::atomic<uint64_t> tail;  // written by the consumer
  // 1 while the consumer sleeps (or is about to) waiting for data.
  alignas(64) std::atomic<uint32_t> consumer_sleeping;
  // CLOCK_MONOTONIC (ns) when the producer last took the consumer's sleep
  // announcement to wake it: on waking, the consumer learns when data came,
  // not when the scheduler ran it (see SpinWindow). Written by the producer
  // only; a hint the consumer bounds, never trusts.
  std::atomic<uint64_t> consumer_woken_ns;
  // 1 while the producer sleeps (or is about to) waiting for space.
  alignas(64) std::atomic<uint32_t> producer_sleeping;
};
static_assert(sizeof(RingHeader) <= kRingHeaderSize, "header fits its page");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "lock-free across processes");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "lock-free across processes");

enum class RingStatus : uint8_t {
  kOk,
  // Reader: no record yet. Writer: not enough free space yet.
  kNeedMore,
  // The end failed; see error(). Sticky.
  kError,
};

enum class RingError : uint8_t {
  kNone = 0,
  // The other side's index is impossible (moved backwards, too far ahead,
  // or misaligned).
  kBadIndex,
  // A record header is impossible (unknown kind, length past the published
  // bytes or the end of the data area, or larger than allowed).
  kBadRecord,
  // Writer only: the record is larger than MaxRecordPayload(); not sticky,
  // the caller sends it another way (the socket or a segment).
  kTooLarge,
};

// The largest payload one record may carry in a ring of `capacity` bytes:
// half the data area less the record header, so that a record always fits
// after at most one wrap record once the reader has caught up.
constexpr size_t RingMaxRecordPayload(size_t capacity) { return capacity / 2 - kRingRecordHeaderSize; }

// The memory of one ring.
class RingMapping {
 public:
  RingMapping() = default;
  ~RingMapping();
  RingMapping(const RingMapping&) = delete;
  RingMapping& operator=(const RingMapping&) = delete;
  RingMapping(RingMapping&& other) noexcept;
  RingMapping& operator=(RingMapping&& other) noexcept;

  // Creates a ring with a data area of `capacity` bytes (a power of two in
  // [kRingMinCapacity, kRingMaxCapacity]) in a new sealed memfd, maps it and
  // writes its header. Returns 0 or -errno (-EINVAL for a bad capacity). The
  // memfd stays owned by this object until TakeFd().
  int Create(size_t capacity);
  // Maps a ring made by a peer. `fd` is borrowed (the caller may close it
  // afterwards). Checks the seals, the size, the magic, the version and the
  // capacity, all read once. Returns 0, -EPROTO for a ring that is not
  // valid, or -errno.
  int Attach(int fd);

  // The memfd made by Create (-1 after TakeFd or for an attached ring).
  int fd() const { return fd_; }
  // Hands the memfd to the caller (to pass with SCM_RIGHTS, then close).
  int TakeFd() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

  bool mapped() const { return base_ != nullptr; }
  // The capacity validated at Create/Attach, kept in private memory.
  size_t capacity() const { return capacity_; }
  RingHeader* header() const { return reinterpret_cast<RingHeader*>(base_); }
  uint8_t* data() const { return base_ + kRingHeaderSize; }
  size_t mapped_size() const { return kRingHeaderSize + capacity_; }

  void Reset();

 private:
  uint8_t* base_ = nullptr;
  size_t capacity_ = 0;
  int fd_ = -1;
};

// The producing end.
class RingWriter {
 public:
  // Borrows `ring`, which must be mapped and outlive the writer. Takes its
  // starting position from the shared head (validated against tail).
  explicit RingWriter(RingMapping* ring);

  // Reserves room for a record of `size` payload bytes and sets *out to where
  // the payload goes. kOk: fill at most `size` bytes, then Commit. kNeedMore:
  // not enough free space now (wait for space: PrepareToSleep). kError:
  // error() says why; kTooLarge when size > max_payload() (that error is not
  // sticky). May publish a wrap record on the way.
  RingStatus Reserve(size_t size, uint8_t** out);
  // Publishes the reserved record with `size` bytes (at most the reserved
  // size). Does nothing unless the last Reserve succeeded and has not been
  // committed. Cheap: one release store; call NeedsWake() after a batch.
  void Commit(size_t size);
  // Reserve + copy + Commit.
  RingStatus Write(const uint8_t* data, size_t size);

  // After a batch of commits: true when the reader announced sleep, in which
  // case it has been cleared, the time stamped (consumer_woken_ns), and the
  // caller must signal the reader once. Includes the full fence that pairs
  // with the reader's announcement.
  bool NeedsWake();
  // A cheap hint, no fence: the reader has announced sleep as far as this
  // thread can see yet. A writer in the middle of a batch uses it to wake a
  // sleeping reader at the first record, so the reader starts on the batch
  // while the rest is written; NeedsWake() after the batch stays the
  // guarantee that no wake-up is lost.
  bool ReaderMaybeSleeping() const { return header_->consumer_sleeping.load(std::memory_order_relaxed) != 0; }

  // Waiting for space (after kNeedMore): announces the producer sleep, then
  // re-checks. Returns true when the caller may sleep (the ring is still
  // full), false when space appeared meanwhile (the announcement is withdrawn).
  // Sleep until signalled, then call DoneSleeping and retry.
  bool PrepareToSleep(size_t size);
  void DoneSleeping();

  size_t max_payload() const { return RingMaxRecordPayload(capacity_); }
  RingError error() const { return error_; }
  // Bytes published and not yet consumed, from the last tail read.
  uint64_t head() const { return head_; }

 private:
  bool ReadTail(uint64_t* tail);
  RingStatus Fail(RingError e) {
    error_ = e;
    return RingStatus::kError;
  }

  RingHeader* header_;
  uint8_t* data_;
  size_t capacity_;
  uint64_t head_ = 0;
  // The last tail read, validated; room is known free up to tail + capacity.
  uint64_t cached_tail_ = 0;
  size_t reserved_ = 0;
  // True between a successful Reserve and its Commit.
  bool reserving_ = false;
  RingError error_ = RingError::kNone;
};

// The consuming end.
class RingReader {
 public:
  // Borrows `ring`, which must be mapped and outlive the reader. Takes its
  // starting position from the shared tail (validated against head).
  explicit RingReader(RingMapping* ring);

  // Looks at the next data record (skipping a wrap record). kOk: *data and
  // *size describe its payload inside the shared mapping, valid until
  // Consume; the bytes may change under the caller if the peer misbehaves.
  // kNeedMore: the ring is empty. kError: error() says why (sticky).
  RingStatus Peek(const uint8_t** data, size_t* size);
  // Releases the record returned by the last Peek. Cheap: one release store;
  // call NeedsWake() after a batch.
  void Consume();

  // After a batch of consumes: true when the writer announced it waits for
  // space (the announcement is cleared; the caller signals the writer once).
  bool NeedsWake();

  // Waiting for data (after kNeedMore): announces the consumer sleep, then
  // re-checks. Returns true when the caller may sleep (still empty), false
  // when data arrived meanwhile (the announcement is withdrawn). Sleep until
  // signalled, then call DoneSleeping and Peek again.
  bool PrepareToSleep();
  void DoneSleeping();

  RingError error() const { return error_; }
  uint64_t tail() const { return tail_; }

  // A cheap hint for a spinning reader, no validation: the writer has
  // published bytes past our tail. Peek decides what they are.
  bool MaybeHasData() const { return header_->head.load(std::memory_order_acquire) != tail_; }

  // When the writer last woke us (MonotonicNs, as the writer stamped it:
  // any value, so callers bound it).
  uint64_t WokenNs() const { return header_->consumer_woken_ns.load(std::memory_order_acquire); }

 private:
  bool ReadHead(uint64_t* head);
  RingStatus Fail(RingError e) {
    error_ = e;
    return RingStatus::kError;
  }

  RingHeader* header_;
  uint8_t* data_;
  size_t capacity_;
  uint64_t tail_ = 0;
  // The last head read, validated; bytes up to it are published.
  uint64_t cached_head_ = 0;
  // Bytes the record from the last Peek occupies (0 when none).
  size_t peeked_ = 0;
  RingError error_ = RingError::kNone;
};

// How long a reader that found its ring empty spins before it announces
// sleep, for an end whose wake-ups are expensive (an event loop woken
// through its wake-up link). Spinning pays only when the next record comes sooner
// than a wake-up would take, so the window follows the recent gaps between "found
// empty" and "data again": twice their running average (at least kMinNs),
// and nothing at all while that average is above kMaxNs / 2, so an idle or
// slow channel sleeps at once and costs no CPU. A spin that finds nothing
// counts as a gap longer than the window it waited, so a stream that slows
// down stops spinning after a few misses. It starts idle: no spin until
// data has been seen to follow quickly.
class SpinWindow {
 public:
  // A sleeping process is woken in about 50–100 µs on a virtual machine
  // (an idle virtual CPU must be brought back), and a peer that slept adds
  // that to every gap we see. A cap near that latency kept every end of a
  // master with several workers asleep, each gap long because the other
  // end had slept too; 300 µs lets them spin past one such wake-up and
  // stay awake while the traffic lasts (+11% pairs/s measured in
  // bench/master-worker.js's workload).
  static constexpr uint64_t kMaxNs = 300000;
  static constexpr uint64_t kMinNs = 1000;
  // Gaps are capped here, so one long pause does not take many short gaps
  // to forget (and the average cannot overflow).
  static constexpr uint64_t kIdleNs = 4 * kMaxNs;

  // How long to spin now, in nanoseconds (0: sleep at once).
  uint64_t window_ns() const {
    if (average_ns_ > kMaxNs / 2) return 0;
    return average_ns_ * 2 < kMinNs ? kMinNs : average_ns_ * 2;
  }
  // Data came `gap_ns` after the ring was found empty (while spinning, or,
  // after a sleep, when the writer stamped its wake-up). The scheduler's
  // wake-up latency must not count: on a virtual machine waking an idle
  // CPU can take 100 µs, which would shut the window, so that every message
  // waits for such a wake-up, whose latency keeps the window shut.
  void Arrived(uint64_t gap_ns) {
    if (gap_ns > kIdleNs) gap_ns = kIdleNs;
    average_ns_ = (3 * average_ns_ + gap_ns) / 4;
  }
  // A spin of `spun_ns` found nothing.
  void Missed(uint64_t spun_ns) { Arrived(2 * spun_ns + kMinNs); }
  uint64_t average_ns() const { return average_ns_; }

 private:
  uint64_t average_ns_ = kIdleNs;
};

// Whether a reader that just drained a socket should spin briefly before
// sleeping, decided by how often its recent spins caught the next message
// (a gap average cannot be learnt on a socket without the scheduler's
// wake-up latency in it). While at least half of them did, every read is
// followed by a spin; below that, one read in kProbeEvery is (a probe), so
// a stream that speeds up is noticed and a slow one costs one missed probe
// per kProbeEvery reads. It starts with probes only.
class SpinHitRate {
 public:
  static constexpr int kProbeEvery = 32;
  // The hit rate is a running average in 1/256ths; a quarter of it is the
  // latest outcome.
  static constexpr int kFull = 256;
  static constexpr int kToSpin = kFull / 2;

  // Called after each read that brought data: whether to spin now.
  bool ShouldSpin() {
    if (hits_ >= kToSpin) return true;
    if (--probe_in_ > 0) return false;
    probe_in_ = kProbeEvery;
    return true;
  }
  // The spin caught data (Hit) or ended without (Missed).
  void Hit() { hits_ = (3 * hits_ + kFull) / 4; }
  void Missed() { hits_ = (3 * hits_) / 4; }
  int hits() const { return hits_; }

 private:
  int hits_ = 0;
  int probe_in_ = kProbeEvery;
};

// CLOCK_MONOTONIC in nanoseconds (a vDSO call, no system call).
uint64_t MonotonicNs();

}  // namespace procwire

#endif  // PROCWIRE_CORE_RING_H_
