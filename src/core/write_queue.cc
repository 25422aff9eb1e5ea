#include "write_queue.h"

#include <cerrno>
#include <climits>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "socket_io.h"

namespace procwire {

namespace {

// Linux's UIO_MAXIOV is 1024; more iovecs than that fail with EINVAL.
constexpr int kMaxIovecs = 1024;

}  // namespace

void WriteQueue::Push(OutChunk chunk) {
  queued_bytes_ += chunk.size;
  total_pushed_ += chunk.size;
  chunks_.push_back(std::move(chunk));
}

void WriteQueue::PopFront() {
  OutChunk& c = chunks_.front();
  if (c.release != nullptr) c.release(c.data, c.hint);
  for (int fd : c.fds) CloseFd(fd);
  chunks_.pop_front();
  front_offset_ = 0;
}

WriteQueue::FlushStatus WriteQueue::Flush(int fd, int* error) {
  iovec iov[kMaxIovecs];
  while (!chunks_.empty()) {
    // Gather chunks until the iovec array is full or a chunk that carries
    // descriptors is reached: descriptors ride on the first byte of their own
    // chunk, so a sendmsg that carries them starts at that chunk.
    int count = 0;
    const std::vector<int>* fds = nullptr;
    for (size_t i = 0; i < chunks_.size() && count < kMaxIovecs; i++) {
      OutChunk& c = chunks_[i];
      if (!c.fds.empty()) {
        if (i != 0 || front_offset_ != 0) break;
        fds = &c.fds;
      }
      const size_t skip = i == 0 ? front_offset_ : 0;
      iov[count].iov_base = c.data + skip;
      iov[count].iov_len = c.size - skip;
      count++;
    }
    const ssize_t n =
        SendVectors(fd, iov, count, fds ? fds->data() : nullptr, fds ? static_cast<int>(fds->size()) : 0);
    write_calls_++;
    if (n < 0) {
      if (n == -EAGAIN || n == -EWOULDBLOCK) return FlushStatus::kWouldBlock;
      *error = static_cast<int>(-n);
      return FlushStatus::kError;
    }
    if (fds != nullptr) {
      // Sent: the kernel now holds its own references.
      for (int d : chunks_.front().fds) CloseFd(d);
      chunks_.front().fds.clear();
    }
    size_t left = static_cast<size_t>(n);
    queued_bytes_ -= left;
    total_written_ += left;
    while (left > 0) {
      OutChunk& c = chunks_.front();
      const size_t rest = c.size - front_offset_;
      if (left >= rest) {
        left -= rest;
        PopFront();
      } else {
        front_offset_ += left;
        left = 0;
      }
    }
    // Zero-length chunks at the front are complete as soon as reached.
    while (!chunks_.empty() && chunks_.front().size == 0 && chunks_.front().fds.empty()) {
      PopFront();
    }
  }
  return FlushStatus::kDrained;
}

size_t WriteQueue::TryWrite(int fd, const uint8_t* data, size_t size) {
  if (!chunks_.empty() || size == 0) return 0;
  iovec iov;
  iov.iov_base = const_cast<uint8_t*>(data);
  iov.iov_len = size;
  const ssize_t n = SendVectors(fd, &iov, 1, nullptr, 0);
  write_calls_++;
  if (n <= 0) return 0;
  total_pushed_ += static_cast<size_t>(n);
  total_written_ += static_cast<size_t>(n);
  return static_cast<size_t>(n);
}

void WriteQueue::Clear() {
  while (!chunks_.empty()) PopFront();
  queued_bytes_ = 0;
}

}  // namespace procwire
