#include "ring_transport.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace procwire {

namespace {

void CloseIfOpen(int fd) {
  if (fd >= 0) close(fd);
}

}  // namespace

RingTransport::~RingTransport() {
  // The reader and writer borrow the mappings: drop them first.
  writer_.reset();
  reader_.reset();
  CloseIfOpen(out_wake_fd_);
  CloseIfOpen(in_wake_fd_);
}

int RingTransport::CreateOutbound(size_t capacity) {
  if (writer_ != nullptr) return -EALREADY;
  const int err = out_map_.Create(capacity);
  if (err != 0) return err;
  const int efd = EventFdCreate();
  if (efd < 0) {
    out_map_.Reset();
    return efd;
  }
  out_wake_fd_ = efd;
  writer_.reset(new RingWriter(&out_map_));
  return 0;
}

int RingTransport::DupOutboundFds(int* ring_fd, int* wake_fd) const {
  *ring_fd = fcntl(out_map_.fd(), F_DUPFD_CLOEXEC, 0);
  if (*ring_fd < 0) return -errno;
  *wake_fd = fcntl(out_wake_fd_, F_DUPFD_CLOEXEC, 0);
  if (*wake_fd < 0) {
    const int err = errno;
    close(*ring_fd);
    *ring_fd = -1;
    return -err;
  }
  return 0;
}

size_t RingTransport::max_frame_bytes() const {
  return writer_ == nullptr ? 0 : writer_->max_payload() - kRingMarkSize;
}

bool RingTransport::Write(uint64_t socket_mark, const uint8_t* frames, size_t size) {
  if (writer_ == nullptr || size > max_frame_bytes()) return false;
  uint8_t* out = nullptr;
  if (writer_->Reserve(kRingMarkSize + size, &out) != RingStatus::kOk) return false;
  std::memcpy(out, &socket_mark, kRingMarkSize);
  if (size != 0) std::memcpy(out + kRingMarkSize, frames, size);
  writer_->Commit(kRingMarkSize + size);
  out_dirty_ = true;
  messages_out++;
  // In a long batch, a sleeping reader is woken every few records rather
  // than only after the last, so both processes work on the stream at once
  // instead of taking turns: a reader that caught up and went back to sleep
  // mid-batch is woken again a few records later (the check is one plain
  // load while the reader is awake). Not at every record: a short batch,
  // such as one answer, is signalled at its end anyway, and waking per
  // record would cost a context switch per message.
  if (++batch_records_ % kEarlyWakeRecords == 0 && writer_->ReaderMaybeSleeping() && writer_->NeedsWake()) {
    EventFdSignal(out_wake_fd_);
    wakes_sent++;
  }
  return true;
}

void RingTransport::WakeReaderIfNeeded() {
  if (!out_dirty_) return;
  out_dirty_ = false;
  batch_records_ = 0;
  if (writer_->NeedsWake()) {
    EventFdSignal(out_wake_fd_);
    wakes_sent++;
  }
}

int RingTransport::AttachInbound(int ring_fd, int wake_fd) {
  if (reader_ != nullptr) {
    CloseIfOpen(wake_fd);
    return -EALREADY;
  }
  // Only the size this version makes: Attach maps (and faults in) the whole
  // ring, which must not be the peer's choice, before the hello included.
  struct stat st;
  if (fstat(ring_fd, &st) != 0 || st.st_size != static_cast<off_t>(kRingHeaderSize + kChannelRingCapacity)) {
    CloseIfOpen(wake_fd);
    return -EPROTO;
  }
  const int err = in_map_.Attach(ring_fd);
  if (err != 0) {
    CloseIfOpen(wake_fd);
    return err;
  }
  // The wake-up descriptor must be an eventfd: anything else (a socket, a
  // pipe the peer keeps writing to) could make our poll spin or block.
  char link[64];
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/fd/%d", wake_fd);
  const ssize_t n = readlink(path, link, sizeof(link) - 1);
  if (wake_fd < 0 || n <= 0 || std::strncmp(link, "anon_inode:[eventfd]", static_cast<size_t>(n)) != 0) {
    CloseIfOpen(wake_fd);
    in_map_.Reset();
    return -EPROTO;
  }
  // Non-blocking: draining it must never block the event loop.
  const int flags = fcntl(wake_fd, F_GETFL);
  if (flags < 0 || fcntl(wake_fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    const int e = errno;
    CloseIfOpen(wake_fd);
    in_map_.Reset();
    return -e;
  }
  in_wake_fd_ = wake_fd;
  reader_.reset(new RingReader(&in_map_));
  if (reader_->error() != RingError::kNone) corrupt_reason_ = "the peer's ring has impossible indices";
  return 0;
}

RingTransport::ReadStatus RingTransport::Read(uint64_t socket_delivered, const uint8_t** frames,
                                              size_t* size) {
  if (corrupt_reason_ != nullptr) return ReadStatus::kCorrupt;
  const uint8_t* data = nullptr;
  size_t length = 0;
  switch (reader_->Peek(&data, &length)) {
    case RingStatus::kNeedMore:
      return ReadStatus::kEmpty;
    case RingStatus::kError:
      corrupt_reason_ = reader_->error() == RingError::kBadIndex
                            ? "the peer's ring index is impossible"
                            : "the peer's ring holds an impossible record";
      return ReadStatus::kCorrupt;
    case RingStatus::kOk:
      break;
  }
  if (length < kRingMarkSize) {
    corrupt_reason_ = "a ring record is shorter than its socket mark";
    return ReadStatus::kCorrupt;
  }
  // One copy out of the shared mapping: the mark is read once, and the
  // frames are decoded from private memory the peer cannot change.
  uint64_t mark = 0;
  std::memcpy(&mark, data, kRingMarkSize);
  if (mark < last_mark_) {
    corrupt_reason_ = "a ring record's socket mark moved backwards";
    return ReadStatus::kCorrupt;
  }
  if (mark > socket_delivered) return ReadStatus::kWaiting;
  last_mark_ = mark;
  scratch_.resize(length - kRingMarkSize);
  if (!scratch_.empty()) std::memcpy(scratch_.data(), data + kRingMarkSize, scratch_.size());
  reader_->Consume();
  *frames = scratch_.data();
  *size = scratch_.size();
  return ReadStatus::kRecord;
}

bool RingTransport::PrepareToSleep() { return reader_->PrepareToSleep(); }
void RingTransport::DoneSleeping() { reader_->DoneSleeping(); }

}  // namespace procwire
