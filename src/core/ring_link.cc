#include "ring_link.h"

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

RingLink::~RingLink() {
  // The reader and writer borrow the mappings: drop them first.
  writer_.reset();
  reader_.reset();
  CloseIfOpen(out_wake_fd_);
  CloseIfOpen(in_wake_fd_);
  CloseIfOpen(in_signal_fd_);
}

int RingLink::CreateInboundWake() {
  if (in_wake_fd_ >= 0) return 0;
  return WakeLinkCreate(&in_wake_fd_, &in_signal_fd_);
}

int RingLink::CreateOutbound(size_t capacity) {
  if (writer_ != nullptr) return -EALREADY;
  int err = CreateInboundWake();
  if (err != 0) return err;
  err = out_map_.Create(capacity);
  if (err != 0) return err;
  writer_.reset(new RingWriter(&out_map_));
  return 0;
}

int RingLink::DupSetupFds(int* ring_fd, int* wake_fd) const {
  *ring_fd = fcntl(out_map_.fd(), F_DUPFD_CLOEXEC, 0);
  if (*ring_fd < 0) return -errno;
  *wake_fd = fcntl(in_signal_fd_, F_DUPFD_CLOEXEC, 0);
  if (*wake_fd < 0) {
    const int err = errno;
    close(*ring_fd);
    *ring_fd = -1;
    return -err;
  }
  return 0;
}

int RingLink::TakePeerWake(int wake_fd) {
  if (out_wake_fd_ >= 0) {
    CloseIfOpen(wake_fd);
    return -EALREADY;
  }
  // Only a unix stream socket: we signal it with a non-blocking send, which
  // no flag the peer sets can turn into a blocking one. An eventfd or a pipe
  // could be made to block our write (a full counter or pipe, O_NONBLOCK
  // cleared by the peer on the shared description).
  if (!IsWakeLinkEnd(wake_fd)) {
    CloseIfOpen(wake_fd);
    return -EPROTO;
  }
  out_wake_fd_ = wake_fd;
  // Records written before the link arrived: a reader that announced sleep
  // meanwhile still holds its announcement, so it is woken now.
  WakeReaderIfNeeded();
  return 0;
}

size_t RingLink::max_frame_bytes() const {
  return writer_ == nullptr ? 0 : writer_->max_payload() - kRingMarkSize;
}

bool RingLink::Write(uint64_t socket_mark, const uint8_t* frames, size_t size) {
  // Until the reader's link has arrived (in its own set-up frame) a record
  // could not wake it, and a reader that holds its own set-up back (a
  // server before the hello is done) would never see it: frames go by the
  // socket until then.
  if (writer_ == nullptr || out_wake_fd_ < 0 || size > max_frame_bytes()) return false;
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
  if (++batch_records_ % kEarlyWakeRecords == 0 && out_wake_fd_ >= 0 && writer_->ReaderMaybeSleeping() &&
      writer_->NeedsWake()) {
    WakeLinkSignal(out_wake_fd_);
    wakes_sent++;
  }
  return true;
}

void RingLink::WakeReaderIfNeeded() {
  // Without the peer's link the reader's announcement is left for
  // TakePeerWake: taking it here would lose the wake-up.
  if (!out_dirty_ || out_wake_fd_ < 0) return;
  out_dirty_ = false;
  batch_records_ = 0;
  if (writer_->NeedsWake()) {
    WakeLinkSignal(out_wake_fd_);
    wakes_sent++;
  }
}

int RingLink::AttachInbound(int ring_fd) {
  if (reader_ != nullptr) return -EALREADY;
  // Only the size this version makes: Attach maps (and faults in) the whole
  // ring, which must not be the peer's choice, before the hello included.
  struct stat st;
  if (fstat(ring_fd, &st) != 0 || st.st_size != static_cast<off_t>(kRingHeaderSize + kChannelRingCapacity)) {
    return -EPROTO;
  }
  int err = CreateInboundWake();
  if (err != 0) return err;
  err = in_map_.Attach(ring_fd);
  if (err != 0) return err;
  reader_.reset(new RingReader(&in_map_));
  if (reader_->error() != RingError::kNone) corrupt_reason_ = "the peer's ring has impossible indices";
  return 0;
}

bool RingLink::DrainWake() {
  if (WakeLinkDrain(in_wake_fd_, kMaxWakeDrainReads) == WakeDrain::kClosed) {
    SetCorrupt("the peer shut down the ring's wake-up link");
    return false;
  }
  if (++idle_wakes_ > kMaxIdleWakes) {
    SetCorrupt("the peer keeps signalling the ring's wake-up link without writing records");
    return false;
  }
  return true;
}

RingLink::ReadStatus RingLink::Read(uint64_t socket_delivered, const uint8_t** frames, size_t* size) {
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
  idle_wakes_ = 0;
  *frames = scratch_.data();
  *size = scratch_.size();
  return ReadStatus::kRecord;
}

bool RingLink::PrepareToSleep() { return reader_->PrepareToSleep(); }
void RingLink::DoneSleeping() { reader_->DoneSleeping(); }

}  // namespace procwire
