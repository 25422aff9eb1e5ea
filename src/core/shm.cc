#include "shm.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "frame_reader.h"
#include "protocol.h"
#include "socket_io.h"

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010  // Linux 5.1
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif

namespace procwire {

namespace {

// A page-aligned stand-in address for zero-length mappings, which mmap
// refuses; it is never dereferenced.
alignas(64) uint8_t g_empty_segment[64];

int MakeMemfd() {
  // Through syscall(2) so older C libraries without memfd_create() build too.
  const int fd = static_cast<int>(syscall(SYS_memfd_create, "procwire", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  return fd < 0 ? -errno : fd;
}

}  // namespace

int RequiredSeals() { return F_SEAL_SEAL | F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW; }

int CreateSegment(size_t size) {
  const int fd = MakeMemfd();
  if (fd < 0) return fd;
  if (ftruncate(fd, static_cast<off_t>(size)) < 0) {
    const int err = errno;
    CloseFd(fd);
    return -err;
  }
  return fd;
}

namespace {

// Writes size bytes at the start of the memfd. write(2) makes each page of
// a new memfd as it copies into it, without clearing it first: one pass over
// the memory, where faulting pages in through a mapping and then copying
// takes two. Returns 0 or -errno.
int WriteAll(int fd, const uint8_t* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    done += static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace

int CreateSealedCopy(const uint8_t* data, size_t size) {
  const int fd = CreateSegment(size);
  if (fd < 0) return fd;
  // No mapping is needed, so the write seal can be set at once afterwards.
  const int written = WriteAll(fd, data, size);
  if (written < 0) {
    CloseFd(fd);
    return written;
  }
  const int r = SealSegment(fd);
  if (r < 0) {
    CloseFd(fd);
    return r;
  }
  return fd;
}

int SealedCopyOfSegment(int fd) {
  struct stat st;
  if (fstat(fd, &st) < 0) return -errno;
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) return CreateSealedCopy(nullptr, 0);
  // Read-only: a shared mapping without write access does not stand in the
  // way of sealing, and this side never writes the original again.
  void* p = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return -errno;
  const int copy = CreateSealedCopy(static_cast<const uint8_t*>(p), size);
  munmap(p, size);
  return copy;
}

int SealSegment(int fd) {
  if (fcntl(fd, F_ADD_SEALS, RequiredSeals()) < 0) return -errno;
  return 0;
}

int SealTransferred(int fd, bool strict) {
  const int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL | (strict ? F_SEAL_WRITE : F_SEAL_FUTURE_WRITE);
  if (fcntl(fd, F_ADD_SEALS, seals) < 0) return -errno;
  return 0;
}

int VerifySegment(int fd, size_t* size, bool accept_future_write) {
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0) return errno == EINVAL ? -EPERM : -errno;  // not a memfd
  const int size_seals = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW;
  const bool write_sealed =
      (seals & F_SEAL_WRITE) != 0 || (accept_future_write && (seals & F_SEAL_FUTURE_WRITE) != 0);
  if ((seals & size_seals) != size_seals || !write_sealed) return -EPERM;
  struct stat st;
  if (fstat(fd, &st) < 0) return -errno;
  if (!S_ISREG(st.st_mode) || st.st_size < 0) return -EPERM;
  *size = static_cast<size_t>(st.st_size);
  return 0;
}

void* MapSegment(int fd, size_t size, bool shared, int* error) {
  if (size == 0) return g_empty_segment;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, shared ? MAP_SHARED : MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) {
    *error = errno;
    return nullptr;
  }
  return p;
}

void UnmapSegment(void* address, size_t size) {
  if (size == 0 || address == g_empty_segment) return;
  munmap(address, size);
}

// ---- recycled segments ------------------------------------------------------

size_t SegmentAnnouncementSize(size_t count) { return 2 + count * protocol::kSegmentEntrySize; }

void EncodeSegmentAnnouncement(const SegmentEntry* entries, size_t count, uint8_t* out) {
  out[0] = protocol::kPooledSegmentsControlByte;
  out[1] = static_cast<uint8_t>(count);
  uint8_t* p = out + 2;
  for (size_t i = 0; i < count; i++) {
    p[0] = entries[i].kind;
    WriteU32BigEndian(p + 1, entries[i].id);
    WriteU32BigEndian(p + 5, entries[i].length);
    p += protocol::kSegmentEntrySize;
  }
}

bool ParseSegmentAnnouncement(const uint8_t* payload, size_t size, std::vector<SegmentEntry>* entries,
                              size_t* descriptors) {
  entries->clear();
  *descriptors = 0;
  if (size < 2 || payload[0] != protocol::kPooledSegmentsControlByte) return false;
  const size_t count = payload[1];
  if (count == 0 || count > protocol::kMaxSegmentsPerFrame || size != SegmentAnnouncementSize(count))
    return false;
  const uint8_t* p = payload + 2;
  for (size_t i = 0; i < count; i++) {
    const SegmentEntry e{p[0], ReadU32BigEndian(p + 1), ReadU32BigEndian(p + 5)};
    if (e.kind > protocol::kSegmentPooled) {
      entries->clear();
      *descriptors = 0;
      return false;
    }
    if (e.kind != protocol::kSegmentPooled) ++*descriptors;
    entries->push_back(e);
    p += protocol::kSegmentEntrySize;
  }
  return true;
}

int PooledSeals() { return F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL; }

int VerifyPooledSegment(int fd, size_t* size) {
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0) return errno == EINVAL ? -EPERM : -errno;  // not a memfd
  if ((seals & PooledSeals()) != PooledSeals()) return -EPERM;
  struct stat st;
  if (fstat(fd, &st) < 0) return -errno;
  if (!S_ISREG(st.st_mode) || st.st_size <= 0) return -EPERM;
  *size = static_cast<size_t>(st.st_size);
  return 0;
}

SegmentPool::SegmentPool(size_t min_class, size_t max_idle_bytes)
    : min_class_(min_class < 4096 ? 4096 : min_class), max_idle_bytes_(max_idle_bytes) {}

void SegmentPool::SetLimits(size_t max_bytes, size_t max_count) {
  max_bytes_ = max_bytes;
  max_count_ = max_count;
}

std::vector<uint32_t> SegmentPool::TakeDropped() {
  std::vector<uint32_t> out;
  out.swap(dropped_);
  return out;
}

bool SegmentPool::MakeRoom(size_t capacity) {
  auto fits = [&] {
    return entries_.size() < max_count_ && capacity <= max_bytes_ && total_bytes_ <= max_bytes_ - capacity;
  };
  // Give up before dropping anything when even an empty idle list would not
  // make room: idle segments are worth keeping for the next message.
  const size_t busy_bytes = total_bytes_ - idle_bytes_;
  if (in_flight_ >= max_count_ || capacity > max_bytes_ || busy_bytes > max_bytes_ - capacity) return false;
  while (!fits()) {
    // The largest idle class first: fewest segments dropped for the room.
    size_t best = 0;
    for (auto& kv : idle_) {
      if (!kv.second.empty() && kv.first > best) best = kv.first;
    }
    if (best == 0) return false;
    const uint32_t id = idle_[best].back();
    idle_[best].pop_back();
    idle_bytes_ -= best;
    Destroy(id);
    dropped_.push_back(id);
  }
  return true;
}

SegmentPool::~SegmentPool() {
  for (auto& kv : entries_) {
    munmap(kv.second.data, kv.second.capacity);
  }
}

size_t SegmentPool::ClassFor(size_t size) const {
  size_t c = min_class_;
  while (c < size) {
    if (c > (SIZE_MAX >> 1)) return 0;
    c <<= 1;
  }
  return c;
}

int SegmentPool::Acquire(size_t size, PooledSegment* out) { return Take(size, nullptr, out); }

int SegmentPool::AcquireCopy(const uint8_t* from, size_t size, PooledSegment* out) {
  return Take(size, from, out);
}

int SegmentPool::Take(size_t size, const uint8_t* from, PooledSegment* out) {
  const size_t capacity = ClassFor(size);
  if (capacity == 0) return -EFBIG;
  auto idle = idle_.find(capacity);
  if (idle != idle_.end() && !idle->second.empty()) {
    const uint32_t id = idle->second.back();
    idle->second.pop_back();
    Entry& e = entries_.at(id);
    e.in_flight = true;
    in_flight_++;
    idle_bytes_ -= e.capacity;
    if (from != nullptr && size > 0) std::memcpy(e.data, from, size);
    *out = PooledSegment{id, -1, e.data, e.capacity, false};
    return 0;
  }
  if (next_id_ == 0) return -EOVERFLOW;  // 4 billion segments made: ids would repeat
  if (!MakeRoom(capacity)) return -ENOSPC;
  const int fd = CreateSegment(capacity);
  if (fd < 0) return fd;
  if (fcntl(fd, F_ADD_SEALS, PooledSeals()) < 0) {
    const int err = errno;
    CloseFd(fd);
    return -err;
  }
  // Bytes to copy go in by write(2), which makes the pages as it fills them.
  // MAP_POPULATE then maps every page now, once (making the ones not written
  // yet), so neither the caller's copy nor a reuse costs a page fault.
  if (from != nullptr && size > 0) {
    const int written = WriteAll(fd, from, size);
    if (written < 0) {
      CloseFd(fd);
      return written;
    }
  }
  void* p = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    CloseFd(fd);
    return -err;
  }
  const uint32_t id = next_id_++;
  entries_.emplace(id, Entry{static_cast<uint8_t*>(p), capacity, true});
  in_flight_++;
  total_bytes_ += capacity;
  *out = PooledSegment{id, fd, static_cast<uint8_t*>(p), capacity, true};
  return 0;
}

int SegmentPool::Recycle(uint32_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end() || !it->second.in_flight) return -EINVAL;
  Entry& e = it->second;
  e.in_flight = false;
  in_flight_--;
  if (idle_bytes_ + e.capacity > max_idle_bytes_) {
    Destroy(id);
    dropped_.push_back(id);
    return 1;
  }
  idle_bytes_ += e.capacity;
  idle_[e.capacity].push_back(id);
  return 0;
}

bool SegmentPool::Discard(uint32_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end() || !it->second.in_flight) return false;
  in_flight_--;
  Destroy(id);
  return true;
}

void SegmentPool::TrimIdle(std::vector<uint32_t>* dropped) {
  for (auto& kv : idle_) {
    for (uint32_t id : kv.second) {
      idle_bytes_ -= entries_.at(id).capacity;
      Destroy(id);
      if (dropped != nullptr) dropped->push_back(id);
    }
  }
  idle_.clear();
}

void SegmentPool::Destroy(uint32_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  munmap(it->second.data, it->second.capacity);
  total_bytes_ -= it->second.capacity;
  entries_.erase(it);
}

SegmentCache::~SegmentCache() {
  for (auto& kv : maps_) munmap(kv.second.data, kv.second.size);
}

int SegmentCache::Add(uint32_t id, int fd) {
  if (maps_.count(id) != 0) return -EEXIST;
  size_t size = 0;
  const int r = VerifyPooledSegment(fd, &size);
  if (r < 0) return r;
  // Shared, not private: a private copy-on-write mapping would keep any page
  // this side wrote and stop seeing the sender's later messages there.
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) return -errno;
  maps_.emplace(id, Mapping{static_cast<uint8_t*>(p), size});
  return 0;
}

uint8_t* SegmentCache::Find(uint32_t id, size_t* size) const {
  auto it = maps_.find(id);
  if (it == maps_.end()) {
    *size = 0;
    return nullptr;
  }
  *size = it->second.size;
  return it->second.data;
}

bool SegmentCache::Remove(uint32_t id) {
  auto it = maps_.find(id);
  if (it == maps_.end()) return false;
  munmap(it->second.data, it->second.size);
  maps_.erase(it);
  return true;
}

}  // namespace procwire
