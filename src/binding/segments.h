// Shared-memory segments as seen from JavaScript: Buffers made by
// procwire.alloc() (backed by a shared mapping of a memfd, so a transfer can
// hand over the memfd instead of copying), ArrayBuffers over received,
// sealed segments (private copy-on-write mappings), and ArrayBuffers over a
// peer's recycled segments (ReceivedSegmentPool).
//
// Ownership: each mapping belongs to its V8 BackingStore; the deleter unmaps
// it (and closes an allocated segment's descriptor). Deleters may run on any
// thread (V8 frees backing stores from its sweeper), so the registry of
// allocated segments is guarded by a mutex. Big allocated and received
// segments are unmapped by a background thread at idle priority: tearing
// down 64 MiB of touched pages takes about 3 ms (10 ms when its pages are
// freed with it), which neither a transfer nor the peer receiving it should
// wait for.
#ifndef PROCWIRE_BINDING_SEGMENTS_H_
#define PROCWIRE_BINDING_SEGMENTS_H_

#include <uv.h>
#include <v8.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace procwire {

// A Buffer of `size` bytes over a fresh memfd. Returns an empty handle with a
// coded error pending on failure.
v8::MaybeLocal<v8::Object> AllocateSegmentBuffer(v8::Isolate* isolate, size_t size, int* error);

// The memfd behind an allocated ArrayBuffer's memory, or -1.
int FindAllocatedSegment(const void* data, size_t* size);

// Makes the deleter of an allocated ArrayBuffer unmap at once instead of in
// the background: a strict transfer seals the memfd with F_SEAL_WRITE right
// after detaching, which the kernel refuses while the mapping exists.
void UnmapAllocatedNow(const void* data);

// An ArrayBuffer over a received segment: checks its seals, maps it
// privately (the caller still closes fd; the mapping keeps the memory).
// Returns an empty handle and *error (EPERM: seals missing; EFBIG: larger
// than max_size, checked before anything is mapped) on failure.
// accept_future_write: F_SEAL_FUTURE_WRITE stands in for F_SEAL_WRITE (the
// peer is trusted; see SealTransferred in src/core/shm.h).
v8::MaybeLocal<v8::ArrayBuffer> MapReceivedSegment(v8::Isolate* isolate, int fd, size_t max_size, int* error,
                                                   bool accept_future_write = false);

// The size of a received segment that was refused or skipped (0 when fstat
// fails): it is acknowledged to the sender all the same, whose count of
// shared memory in flight would otherwise never come down (SEGACK).
size_t RefusedSegmentBytes(int fd);

// Detaches an ArrayBuffer over a peer's recycled segment (a Buffer that
// arrived through one), so the segment goes back to its sender at once
// rather than when the Buffer is collected; every view of that ArrayBuffer
// becomes empty. Returns false (and does nothing) for any other ArrayBuffer.
bool ReleaseReceivedSegment(v8::Local<v8::ArrayBuffer> ab);

// V8 counts an ArrayBuffer's bytes as external memory when it is made, and
// once that growth passes its limit it starts marking; if marking is still
// under way when the next big ArrayBuffer is made, V8 advances it right
// there (a step of up to 5-10 ms, or the collection's pause), before that
// message is even decoded. So once a batch that took segments (recycled,
// sealed or transferred) was handled, the channel calls this to let V8 do
// that pending work then, while the peer prepares its next message.
// Threading: the isolate's thread.
void LetCollectorCatchUp(v8::Isolate* isolate);

// The receiving side of a peer's recycled segments (one per channel): maps
// each segment once (shared, pre-faulted) when its descriptor arrives,
// builds an ArrayBuffer over it for every message that uses it, and when
// V8 frees that ArrayBuffer's memory (the Buffer was collected) queues the
// id for return and wakes the loop, which calls on_return with the ids.
// A segment's mapping lives until the peer told us to forget it AND no
// ArrayBuffer uses it any more, so nothing the receiver can still read is
// unmapped, and the peer reuses a segment only after its return.
//
// Ownership: the owner (the channel) calls Close() before destroying it;
// ArrayBuffers handed out keep their mappings alive beyond that.
// Threading: everything but the ArrayBuffer deleters on the loop thread.
class ReceivedSegmentPool {
 public:
  using ReturnCallback = std::function<void(std::vector<uint32_t>& ids)>;
  // max_mapped: the most bytes of the peer's segments mapped at once; a
  // new segment past it is refused (-ENOSPC), so a peer cannot make us map
  // without bound.
  ReceivedSegmentPool(v8::Isolate* isolate, uv_loop_t* loop, ReturnCallback on_return, size_t max_mapped);
  ~ReceivedSegmentPool();
  ReceivedSegmentPool(const ReceivedSegmentPool&) = delete;
  ReceivedSegmentPool& operator=(const ReceivedSegmentPool&) = delete;

  // Maps a new segment `id` (fd borrowed). Returns 0, -EEXIST (id known),
  // -EPERM (not a size-sealed memfd), -EFBIG (larger than max_size),
  // -ENOSPC (past max_mapped), -errno.
  int Add(uint32_t id, int fd, size_t max_size);
  // An ArrayBuffer over bytes [0, length) of segment `id`. Fails with
  // *error ENOENT (unknown id) or EFBIG (length past the segment's end).
  v8::MaybeLocal<v8::ArrayBuffer> Take(uint32_t id, size_t length, int* error);
  // The peer dropped segment `id`. Returns false for an unknown id.
  bool Forget(uint32_t id);
  // Stops the returns (no more callbacks) and drops the cache's mappings.
  void Close();

  size_t segments() const { return maps_.size(); }
  size_t mapped_bytes() const { return mapped_bytes_; }

  // Shared with the ArrayBuffer deleters, which may outlive the pool.
  struct Returns {
    std::mutex mutex;
    std::vector<uint32_t> ids;
    uv_async_t* async = nullptr;  // null once closed
  };
  struct Mapping {
    uint8_t* data;
    size_t size;
    std::atomic<int> refs;
  };

 private:
  static void OnAsync(uv_async_t* handle);

  v8::Isolate* isolate_;
  ReturnCallback on_return_;
  std::shared_ptr<Returns> returns_;
  std::unordered_map<uint32_t, Mapping*> maps_;
  size_t mapped_bytes_ = 0;
  size_t max_mapped_;
};

}  // namespace procwire

#endif  // PROCWIRE_BINDING_SEGMENTS_H_
