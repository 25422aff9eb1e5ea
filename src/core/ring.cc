#include "ring.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif

namespace procwire {

namespace {

// The seals a ring's memfd carries: its size is fixed for good, so a peer
// cannot truncate it under our mapping (which would turn our accesses into
// SIGBUS), and no further seal (such as a write seal) can be added.
constexpr int kRingSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

bool IsPowerOfTwo(size_t v) { return v != 0 && (v & (v - 1)) == 0; }

bool ValidCapacity(uint64_t c) {
  return c >= kRingMinCapacity && c <= kRingMaxCapacity && IsPowerOfTwo(static_cast<size_t>(c));
}

size_t RecordSpace(size_t payload) { return kRingRecordHeaderSize + ((payload + 7) & ~size_t{7}); }

// Shared-memory reads and writes of plain (non-atomic) header fields and
// record headers go through single relaxed atomic accesses: each value is
// read exactly once into a local, validated, and only the local is used, so
// a peer changing it in between cannot get a different value past the check.
uint32_t LoadOnce32(const uint8_t* p) {
  return __atomic_load_n(reinterpret_cast<const uint32_t*>(p), __ATOMIC_RELAXED);
}
uint64_t LoadOnce64(const void* p) {
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_RELAXED);
}
void StoreRecordHeader(uint8_t* p, uint32_t length, RingRecordKind kind) {
  __atomic_store_n(reinterpret_cast<uint32_t*>(p), length, __ATOMIC_RELAXED);
  __atomic_store_n(reinterpret_cast<uint32_t*>(p + 4), static_cast<uint32_t>(kind), __ATOMIC_RELAXED);
}

}  // namespace

// ---- RingMapping ----------------------------------------------------------

RingMapping::~RingMapping() { Reset(); }

RingMapping::RingMapping(RingMapping&& other) noexcept
    : base_(other.base_), capacity_(other.capacity_), fd_(other.fd_) {
  other.base_ = nullptr;
  other.capacity_ = 0;
  other.fd_ = -1;
}

RingMapping& RingMapping::operator=(RingMapping&& other) noexcept {
  if (this != &other) {
    Reset();
    base_ = other.base_;
    capacity_ = other.capacity_;
    fd_ = other.fd_;
    other.base_ = nullptr;
    other.capacity_ = 0;
    other.fd_ = -1;
  }
  return *this;
}

void RingMapping::Reset() {
  if (base_ != nullptr) munmap(base_, mapped_size());
  if (fd_ >= 0) close(fd_);
  base_ = nullptr;
  capacity_ = 0;
  fd_ = -1;
}

int RingMapping::Create(size_t capacity) {
  Reset();
  if (!ValidCapacity(capacity)) return -EINVAL;
  const int fd =
      static_cast<int>(syscall(SYS_memfd_create, "procwire-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (fd < 0) return -errno;
  const size_t size = kRingHeaderSize + capacity;
  if (ftruncate(fd, static_cast<off_t>(size)) < 0 || fcntl(fd, F_ADD_SEALS, kRingSeals) < 0) {
    const int err = errno;
    close(fd);
    return -err;
  }
  // MAP_POPULATE faults every page in now, so the first laps of the ring do
  // not pay a page fault per 4 KiB in the middle of the hot path.
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return -err;
  }
  base_ = static_cast<uint8_t*>(p);
  capacity_ = capacity;
  fd_ = fd;
  // A fresh memfd reads as zeros, which is the valid initial state of every
  // atomic in the header; only the constants need writing.
  RingHeader* h = header();
  h->magic = kRingMagic;
  h->version = kRingVersion;
  h->capacity = capacity;
  std::atomic_thread_fence(std::memory_order_release);
  return 0;
}

int RingMapping::Attach(int fd) {
  Reset();
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0) return errno == EINVAL ? -EPROTO : -errno;
  if ((seals & kRingSeals) != kRingSeals) return -EPROTO;
  struct stat st;
  if (fstat(fd, &st) < 0) return -errno;
  if (!S_ISREG(st.st_mode) || st.st_size <= static_cast<off_t>(kRingHeaderSize)) return -EPROTO;
  const uint64_t capacity = static_cast<uint64_t>(st.st_size) - kRingHeaderSize;
  if (!ValidCapacity(capacity)) return -EPROTO;
  const size_t size = static_cast<size_t>(st.st_size);
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) return -errno;
  const RingHeader* h = static_cast<const RingHeader*>(p);
  if (LoadOnce64(&h->magic) != kRingMagic || __atomic_load_n(&h->version, __ATOMIC_RELAXED) != kRingVersion ||
      LoadOnce64(&h->capacity) != capacity) {
    munmap(p, size);
    return -EPROTO;
  }
  base_ = static_cast<uint8_t*>(p);
  capacity_ = static_cast<size_t>(capacity);
  return 0;
}

// ---- RingWriter -----------------------------------------------------------

RingWriter::RingWriter(RingMapping* ring)
    : header_(ring->header()), data_(ring->data()), capacity_(ring->capacity()) {
  const uint64_t head = header_->head.load(std::memory_order_acquire);
  const uint64_t tail = header_->tail.load(std::memory_order_acquire);
  if ((head & 7) != 0 || (tail & 7) != 0 || tail > head || head - tail > capacity_) {
    error_ = RingError::kBadIndex;
    return;
  }
  head_ = head;
  cached_tail_ = tail;
}

bool RingWriter::ReadTail(uint64_t* tail) {
  const uint64_t t = header_->tail.load(std::memory_order_acquire);
  // The reader only moves tail forward, in whole records, and never past
  // what we published.
  if (t < cached_tail_ || t > head_ || (t & 7) != 0) {
    error_ = RingError::kBadIndex;
    return false;
  }
  cached_tail_ = t;
  *tail = t;
  return true;
}

RingStatus RingWriter::Reserve(size_t size, uint8_t** out) {
  reserving_ = false;
  if (error_ == RingError::kTooLarge) error_ = RingError::kNone;
  if (error_ != RingError::kNone) return RingStatus::kError;
  if (size > max_payload()) return Fail(RingError::kTooLarge);
  const size_t need = RecordSpace(size);
  uint64_t tail = cached_tail_;
  size_t offset = static_cast<size_t>(head_ & (capacity_ - 1));
  size_t contiguous = capacity_ - offset;
  if (need > contiguous) {
    // The record would cross the end: fill the rest with a wrap record first.
    if (capacity_ - (head_ - tail) < contiguous) {
      if (!ReadTail(&tail)) return RingStatus::kError;
      if (capacity_ - (head_ - tail) < contiguous) return RingStatus::kNeedMore;
    }
    StoreRecordHeader(data_ + offset, static_cast<uint32_t>(contiguous - kRingRecordHeaderSize),
                      RingRecordKind::kWrap);
    head_ += contiguous;
    header_->head.store(head_, std::memory_order_release);
    offset = 0;
  }
  if (capacity_ - (head_ - tail) < need) {
    if (!ReadTail(&tail)) return RingStatus::kError;
    if (capacity_ - (head_ - tail) < need) return RingStatus::kNeedMore;
  }
  reserved_ = size;
  reserving_ = true;
  *out = data_ + offset + kRingRecordHeaderSize;
  return RingStatus::kOk;
}

void RingWriter::Commit(size_t size) {
  // Without a reservation the space at head may still hold unread records:
  // publishing anything there would overwrite them.
  if (!reserving_) return;
  reserving_ = false;
  if (size > reserved_) size = reserved_;
  const size_t offset = static_cast<size_t>(head_ & (capacity_ - 1));
  StoreRecordHeader(data_ + offset, static_cast<uint32_t>(size), RingRecordKind::kData);
  head_ += RecordSpace(size);
  reserved_ = 0;
  // Release: the record's bytes and header are visible before the new head.
  header_->head.store(head_, std::memory_order_release);
}

RingStatus RingWriter::Write(const uint8_t* data, size_t size) {
  uint8_t* out = nullptr;
  const RingStatus s = Reserve(size, &out);
  if (s != RingStatus::kOk) return s;
  if (size != 0) std::memcpy(out, data, size);
  Commit(size);
  return RingStatus::kOk;
}

bool RingWriter::NeedsWake() {
  // Pairs with the fence in RingReader::PrepareToSleep: either the reader's
  // re-check sees our head, or we see its announcement here.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (header_->consumer_sleeping.load(std::memory_order_relaxed) == 0) return false;
  if (header_->consumer_sleeping.exchange(0, std::memory_order_acq_rel) == 0) return false;
  header_->consumer_woken_ns.store(MonotonicNs(), std::memory_order_release);
  return true;
}

bool RingWriter::PrepareToSleep(size_t size) {
  if (error_ != RingError::kNone && error_ != RingError::kTooLarge) return false;
  header_->producer_sleeping.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  uint64_t tail = 0;
  if (!ReadTail(&tail)) {
    header_->producer_sleeping.store(0, std::memory_order_relaxed);
    return false;
  }
  // Progress is possible when the next Reserve could write at least its
  // wrap record, or the whole record.
  const size_t need = RecordSpace(size > max_payload() ? max_payload() : size);
  const size_t contiguous = capacity_ - static_cast<size_t>(head_ & (capacity_ - 1));
  const size_t step = need > contiguous ? contiguous : need;
  if (capacity_ - (head_ - tail) >= step) {
    header_->producer_sleeping.store(0, std::memory_order_relaxed);
    return false;
  }
  return true;
}

void RingWriter::DoneSleeping() { header_->producer_sleeping.store(0, std::memory_order_relaxed); }

// ---- RingReader -----------------------------------------------------------

RingReader::RingReader(RingMapping* ring)
    : header_(ring->header()), data_(ring->data()), capacity_(ring->capacity()) {
  const uint64_t head = header_->head.load(std::memory_order_acquire);
  const uint64_t tail = header_->tail.load(std::memory_order_acquire);
  if ((head & 7) != 0 || (tail & 7) != 0 || tail > head || head - tail > capacity_) {
    error_ = RingError::kBadIndex;
    return;
  }
  tail_ = tail;
  cached_head_ = head;
}

bool RingReader::ReadHead(uint64_t* head) {
  const uint64_t h = header_->head.load(std::memory_order_acquire);
  // The writer only moves head forward, in whole records, and never more
  // than a ring's worth ahead of what we consumed.
  if (h < cached_head_ || h - tail_ > capacity_ || (h & 7) != 0) {
    error_ = RingError::kBadIndex;
    return false;
  }
  cached_head_ = h;
  *head = h;
  return true;
}

RingStatus RingReader::Peek(const uint8_t** data, size_t* size) {
  if (error_ != RingError::kNone) return RingStatus::kError;
  peeked_ = 0;
  // At most a wrap record and then a data record: never more iterations.
  for (int step = 0; step < 2; step++) {
    uint64_t head = cached_head_;
    if (head == tail_) {
      if (!ReadHead(&head)) return RingStatus::kError;
      if (head == tail_) return RingStatus::kNeedMore;
    }
    const uint64_t available = head - tail_;
    const size_t offset = static_cast<size_t>(tail_ & (capacity_ - 1));
    const size_t contiguous = capacity_ - offset;
    // Whole records only are ever published, so at least a header is there.
    if (available < kRingRecordHeaderSize) return Fail(RingError::kBadRecord);
    const uint32_t length = LoadOnce32(data_ + offset);
    const uint32_t kind = LoadOnce32(data_ + offset + 4);
    if (kind == static_cast<uint32_t>(RingRecordKind::kWrap)) {
      // A wrap fills exactly the rest of the data area, and is never at the
      // start (a record always fits there), nor twice in a row.
      if (offset == 0 || step != 0 || length != contiguous - kRingRecordHeaderSize ||
          contiguous > available) {
        return Fail(RingError::kBadRecord);
      }
      tail_ += contiguous;
      // Publish at once: a writer waiting for space may need these bytes.
      header_->tail.store(tail_, std::memory_order_release);
      continue;
    }
    if (kind != static_cast<uint32_t>(RingRecordKind::kData)) return Fail(RingError::kBadRecord);
    if (length > RingMaxRecordPayload(capacity_)) return Fail(RingError::kBadRecord);
    const size_t space = RecordSpace(length);
    if (space > contiguous || space > available) return Fail(RingError::kBadRecord);
    *data = data_ + offset + kRingRecordHeaderSize;
    *size = length;
    peeked_ = space;
    return RingStatus::kOk;
  }
  return Fail(RingError::kBadRecord);
}

void RingReader::Consume() {
  if (peeked_ == 0) return;
  tail_ += peeked_;
  peeked_ = 0;
  // Release: we are done reading the record before the writer may reuse it.
  header_->tail.store(tail_, std::memory_order_release);
}

bool RingReader::NeedsWake() {
  // Pairs with the fence in RingWriter::PrepareToSleep.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (header_->producer_sleeping.load(std::memory_order_relaxed) == 0) return false;
  return header_->producer_sleeping.exchange(0, std::memory_order_acq_rel) != 0;
}

bool RingReader::PrepareToSleep() {
  if (error_ != RingError::kNone) return false;
  header_->consumer_sleeping.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  uint64_t head = 0;
  if (!ReadHead(&head) || head != tail_) {
    header_->consumer_sleeping.store(0, std::memory_order_relaxed);
    return false;
  }
  return true;
}

void RingReader::DoneSleeping() { header_->consumer_sleeping.store(0, std::memory_order_relaxed); }

// ---- time ----------------------------------------------------------------------

uint64_t MonotonicNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace procwire
