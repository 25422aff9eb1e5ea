// Sealed shared-memory segments (Linux memfd) for messages sent out of line.
//
// A sender copies bytes into a fresh memfd (or hands over one made by
// CreateSegment and filled through a shared mapping), seals it against
// writing, shrinking and growing, and passes the descriptor with SCM_RIGHTS.
// The receiver checks the seals and size, then maps it privately: it sees
// exactly the bytes that were sealed, and its own writes stay its own
// (copy-on-write). A memfd has no name in any filesystem, so nothing is left
// behind when a process dies, however it dies.
//
// Ownership: functions returning a descriptor or mapping hand it to the
// caller (CloseFd / UnmapSegment). Threading: stateless; any thread.
#ifndef PROCWIRE_CORE_SHM_H_
#define PROCWIRE_CORE_SHM_H_

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace procwire {

// The seals a received segment must carry.
int RequiredSeals();

// A new, empty-content memfd of `size` bytes (close-on-exec, sealable).
// Returns the fd or -errno.
int CreateSegment(size_t size);

// A new memfd holding a copy of data[0, size), already sealed. Returns the fd
// or -errno.
int CreateSealedCopy(const uint8_t* data, size_t size);

// Adds the write/shrink/grow/seal seals. Fails with -EBUSY while a shared
// writable mapping of the segment exists.
int SealSegment(int fd);

// Checks that fd is a memfd carrying RequiredSeals() and returns its size in
// *size. Returns 0, -EPERM when seals are missing, or -errno.
// accept_future_write: F_SEAL_FUTURE_WRITE may stand in for F_SEAL_WRITE
// (a transfer between trusting peers, see SealTransferred).
int VerifySegment(int fd, size_t* size, bool accept_future_write = false);

// Seals a transferred segment (one made by CreateSegment and filled through
// a shared mapping). strict: F_SEAL_WRITE, which the kernel grants only once
// no writable mapping is left, so the caller must have unmapped its own
// first (unmapping 64 MiB of touched pages costs about 3 ms). Otherwise
// F_SEAL_FUTURE_WRITE, which costs nothing while the sender's mapping still
// exists: no new writable mapping and no write(2) can change the bytes, but
// a writable mapping made before the seal still can, so it only guards
// against a sender that drops its own mapping (procwire's does, once the
// Buffer is detached). Adds the shrink, grow and seal seals either way.
// Returns 0 or -errno (-EPERM: already sealed, -EBUSY: still mapped, strict).
int SealTransferred(int fd, bool strict);

// A new memfd holding a copy of segment fd's bytes, sealed as
// CreateSealedCopy's: for a transfer whose strict seal the kernel refused
// (-EBUSY) although no mapping is left, because it still holds a reference
// to one of the pages for a moment. Returns the fd or -errno.
int SealedCopyOfSegment(int fd);

// Maps a segment: shared read-write (for segments being filled) or private
// copy-on-write (for received, sealed segments). Returns nullptr on failure
// with *error = errno. A zero size maps nothing and returns a non-null dummy.
void* MapSegment(int fd, size_t size, bool shared, int* error);
void UnmapSegment(void* address, size_t size);

// ---- recycled segments ------------------------------------------------------

// One entry of a [0xFC] segment announcement (docs/protocol.md): the kind
// (protocol::kSegmentSealed, kSegmentPooledNew, kSegmentPooled), the
// recycled segment's id and the message's bytes in it.
struct SegmentEntry {
  uint8_t kind;
  uint32_t id;
  uint32_t length;
};

// The payload of a [0xFC] control frame for `count` entries (1..64):
// 2 + count * protocol::kSegmentEntrySize bytes.
size_t SegmentAnnouncementSize(size_t count);
// Writes the payload ([0xFC][n] and the entries) to out, which has
// SegmentAnnouncementSize(count) bytes.
void EncodeSegmentAnnouncement(const SegmentEntry* entries, size_t count, uint8_t* out);
// Parses a [0xFC] payload (any bytes). Returns true with the entries and
// the number of descriptors they need (kinds 0 and 1), or false when it is
// malformed: wrong first byte, a count of 0 or over 64, a size that does
// not match the count, or an unknown kind.
bool ParseSegmentAnnouncement(const uint8_t* payload, size_t size, std::vector<SegmentEntry>* entries,
                              size_t* descriptors);
//
// A fresh segment is faulted in page by page as the sender copies into it,
// which costs about as much as the copy itself; a sealed one can never be
// written again. Recycled segments avoid both: a per-channel SegmentPool on
// the sending side keeps pre-faulted segments, the sender copies a message
// into one and passes its descriptor once (afterwards only its id), and the
// receiver, which keeps its mapping in a SegmentCache, hands the id back when
// it no longer needs the bytes (when the Buffer over them is collected). The
// segment is then reused for a later message.
//
// Guarantee: pooled segments are sealed against shrinking and growing only,
// so a receiver's mapping can never fault (SIGBUS) by truncation, but the
// sender can still change the bytes after sending. That suits a parent and
// its own child, which trust each other; between peers that do not, the
// sealed single-use segments above remain the mode that guarantees the
// receiver sees exactly the bytes that were sent.

// The seals a pooled segment carries.
int PooledSeals();

// Checks that fd is a memfd carrying PooledSeals() and returns its size in
// *size. Returns 0, -EPERM when seals are missing, or -errno.
int VerifyPooledSegment(int fd, size_t* size);

struct PooledSegment {
  // Names the segment on the wire; never 0, never reused by one pool.
  uint32_t id = 0;
  // When `fresh`, the segment's descriptor, now the caller's: it passes it
  // to the receiver (SCM_RIGHTS) and closes it. The pool keeps only its
  // mapping, so a pool of many segments holds no descriptors (a process
  // with many channels would otherwise hold one per recycled segment of
  // each). -1 when not fresh: the receiver has the segment mapped already.
  int fd = -1;
  // A shared read-write mapping of the whole segment, pre-faulted.
  uint8_t* data = nullptr;
  size_t capacity = 0;
  // True when the segment was made for this call: the receiver has not seen
  // its descriptor yet.
  bool fresh = false;
};

// The sending side's pool. Ownership: the pool owns every segment's
// mapping, in flight or idle, until its destruction (a receiver's own
// mapping keeps the memory alive after that); a segment's descriptor goes
// to the caller with the segment's first use (PooledSegment::fd). Threading: one
// thread at a time; no locks.
class SegmentPool {
 public:
  // Segments come in power-of-two size classes from min_class bytes; at most
  // max_idle_bytes of idle segments are kept for reuse.
  explicit SegmentPool(size_t min_class = size_t{64} << 10, size_t max_idle_bytes = size_t{256} << 20);
  // Bounds on everything the pool holds, idle and in flight: a new segment
  // is made only while the pool stays within max_bytes and max_count
  // (idle segments of other size classes are dropped first to make room).
  // Defaults: no bound beyond the idle limit.
  void SetLimits(size_t max_bytes, size_t max_count);
  ~SegmentPool();
  SegmentPool(const SegmentPool&) = delete;
  SegmentPool& operator=(const SegmentPool&) = delete;

  // A segment of at least `size` bytes (an idle one of the right class, or a
  // new pre-faulted one), now in flight. Returns 0, -ENOSPC when the limits
  // leave no room (the caller sends another way), or -errno.
  int Acquire(size_t size, PooledSegment* out);
  // As Acquire, and copies the `size` bytes at `from` to the segment's start.
  // A new segment is filled by write(2) before it is mapped: the kernel makes
  // each page as it copies into it, where pre-faulting first would clear
  // every page and then copy over it (at 8 MiB about 4 ms instead of 6).
  int AcquireCopy(const uint8_t* from, size_t size, PooledSegment* out);
  // The receiver handed segment `id` back. Returns 0 when it is idle again,
  // 1 when it was dropped instead (the idle limit was reached; tell the
  // receiver to forget it), or -EINVAL for an id that is unknown or not in
  // flight (a confused or hostile receiver).
  int Recycle(uint32_t id);
  // Destroys an in-flight segment the receiver never heard of (its message
  // was not sent after all). Returns false for an id not in flight.
  bool Discard(uint32_t id);
  // Drops every idle segment; returns their ids in *dropped (may be null) so
  // the receiver can be told to forget them.
  void TrimIdle(std::vector<uint32_t>* dropped);
  // Ids of segments dropped by Recycle or to make room in Acquire since the
  // last call (the receiver must be told to forget them); clears the list.
  std::vector<uint32_t> TakeDropped();

  size_t segments() const { return entries_.size(); }
  size_t total_bytes() const { return total_bytes_; }
  size_t in_flight() const { return in_flight_; }
  size_t idle_bytes() const { return idle_bytes_; }

 private:
  struct Entry {
    uint8_t* data;
    size_t capacity;
    bool in_flight;
  };
  size_t ClassFor(size_t size) const;
  // Acquire and AcquireCopy: `from` is null for Acquire.
  int Take(size_t size, const uint8_t* from, PooledSegment* out);
  void Destroy(uint32_t id);

  // Drops idle segments (largest first) until a new one of `capacity` fits
  // the limits; false when even an empty idle list leaves no room.
  bool MakeRoom(size_t capacity);

  size_t min_class_;
  size_t max_idle_bytes_;
  size_t max_bytes_ = SIZE_MAX;
  size_t max_count_ = SIZE_MAX;
  size_t total_bytes_ = 0;
  std::vector<uint32_t> dropped_;
  uint32_t next_id_ = 1;
  size_t in_flight_ = 0;
  size_t idle_bytes_ = 0;
  std::unordered_map<uint32_t, Entry> entries_;
  // Idle ids by size class (capacity).
  std::unordered_map<size_t, std::vector<uint32_t>> idle_;
};

// The receiving side's mappings of a peer's pooled segments, by id.
// Ownership: owns the mappings (not the descriptors, which Add borrows).
// Threading: one thread at a time.
class SegmentCache {
 public:
  SegmentCache() = default;
  ~SegmentCache();
  SegmentCache(const SegmentCache&) = delete;
  SegmentCache& operator=(const SegmentCache&) = delete;

  // Maps a segment the peer sent under `id` (fd borrowed; close it after).
  // Returns 0, -EEXIST when the id is already mapped, -EPERM for a
  // descriptor that is not a pooled segment, or -errno.
  int Add(uint32_t id, int fd);
  // The mapping of a known segment, or nullptr (with *size 0).
  uint8_t* Find(uint32_t id, size_t* size) const;
  // Unmaps a segment the peer dropped. Returns false for an unknown id.
  bool Remove(uint32_t id);
  size_t size() const { return maps_.size(); }

 private:
  struct Mapping {
    uint8_t* data;
    size_t size;
  };
  std::unordered_map<uint32_t, Mapping> maps_;
};

}  // namespace procwire

#endif  // PROCWIRE_CORE_SHM_H_
