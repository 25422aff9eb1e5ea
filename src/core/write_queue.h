// The outgoing side of a stream socket, in the manner of libuv's write queue:
// chunks wait in order and are written with as few sendmsg(2) calls as the
// kernel allows, several chunks per call (gathered I/O).
//
// Ownership: the queue owns every chunk it holds (and any descriptors that
// travel with a chunk) until the bytes are written or the queue is cleared;
// then it calls the chunk's release function and closes those descriptors.
// Threading: single-threaded; the owner serialises calls.
#ifndef PROCWIRE_CORE_WRITE_QUEUE_H_
#define PROCWIRE_CORE_WRITE_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace procwire {

struct OutChunk {
  uint8_t* data = nullptr;
  size_t size = 0;
  // Frees `data` once written or dropped; may be null for static data.
  void (*release)(uint8_t* data, void* hint) = nullptr;
  void* hint = nullptr;
  // Descriptors sent with SCM_RIGHTS alongside the first byte of this chunk.
  // The queue owns them and closes them once sent or dropped.
  std::vector<int> fds;
};

class WriteQueue {
 public:
  enum class FlushStatus : uint8_t {
    kDrained,     // Everything was written.
    kWouldBlock,  // The socket is full; wait for it to become writable.
    kError,       // A write failed; *error holds errno.
  };

  WriteQueue() = default;
  ~WriteQueue() { Clear(); }
  WriteQueue(const WriteQueue&) = delete;
  WriteQueue& operator=(const WriteQueue&) = delete;

  void Push(OutChunk chunk);

  // Writes as much as the socket takes now. Never blocks (fd is expected to
  // be non-blocking).
  FlushStatus Flush(int fd, int* error);

  // Only while the queue is empty: one write of `data` straight to the
  // socket, as libuv's uv_try_write, counted as pushed and written. Returns
  // the bytes the socket took (0 when it was full or the write failed: the
  // caller then pushes everything, and the next Flush meets the same error
  // and reports it). The caller keeps `data`; the queue never holds it.
  size_t TryWrite(int fd, const uint8_t* data, size_t size);

  // Drops every queued chunk, releasing its memory and descriptors.
  void Clear();

  bool empty() const { return chunks_.empty(); }
  size_t queued_bytes() const { return queued_bytes_; }
  size_t queued_chunks() const { return chunks_.size(); }
  // Monotonic byte counters, so callers can tell when a given message has
  // been handed to the kernel.
  uint64_t total_pushed() const { return total_pushed_; }
  uint64_t total_written() const { return total_written_; }
  uint64_t write_calls() const { return write_calls_; }

 private:
  void PopFront();

  std::deque<OutChunk> chunks_;
  // Bytes of the front chunk already written.
  size_t front_offset_ = 0;
  size_t queued_bytes_ = 0;
  uint64_t total_pushed_ = 0;
  uint64_t total_written_ = 0;
  uint64_t write_calls_ = 0;
};

}  // namespace procwire

#endif  // PROCWIRE_CORE_WRITE_QUEUE_H_
