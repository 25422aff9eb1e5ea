// Tests for recycled shared-memory segments (SegmentPool / SegmentCache in
// src/core/shm.h): size classes and reuse, the idle limit, hand-backs a
// receiver gets wrong, what a receiver accepts, and two processes cycling
// segments 100k times with no descriptor or mapping left behind.
#include "shm.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "inbound.h"
#include "protocol.h"
#include "socket_io.h"

namespace procwire {
namespace {

constexpr int kWaitMs = 5000;
constexpr size_t kKiB = 1024;

size_t CountFds() {
  size_t n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return 0;
  while (readdir(d) != nullptr) n++;
  closedir(d);
  return n;
}

// Mappings of memfds (segments) only: the allocator's own mappings (ASan's
// in particular) come and go and would make a total count meaningless.
size_t CountMappings() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  size_t n = 0;
  while (std::getline(maps, line)) {
    if (line.find("/memfd:") != std::string::npos) n++;
  }
  return n;
}

TEST(SegmentPool, SizeClassesAndReuse) {
  SegmentPool pool(64 * kKiB);
  PooledSegment a, b, c;
  ASSERT_EQ(pool.Acquire(1, &a), 0);
  EXPECT_EQ(a.capacity, 64 * kKiB);
  EXPECT_TRUE(a.fresh);
  EXPECT_NE(a.id, 0u);
  EXPECT_GE(a.fd, 0);
  ASSERT_EQ(pool.Acquire(64 * kKiB + 1, &b), 0);
  EXPECT_EQ(b.capacity, 128 * kKiB);
  EXPECT_NE(a.id, b.id);
  // Writable through the pool's mapping, and visible through the fd.
  std::memset(a.data, 0x61, a.capacity);
  char byte = 0;
  ASSERT_EQ(pread(a.fd, &byte, 1, static_cast<off_t>(a.capacity - 1)), 1);
  EXPECT_EQ(byte, 0x61);
  EXPECT_EQ(pool.in_flight(), 2u);
  // Back and out again: the same segment, not fresh, same memory.
  ASSERT_EQ(pool.Recycle(a.id), 0);
  EXPECT_EQ(pool.in_flight(), 1u);
  EXPECT_EQ(pool.idle_bytes(), 64 * kKiB);
  ASSERT_EQ(pool.Acquire(1000, &c), 0);
  EXPECT_EQ(c.id, a.id);
  EXPECT_FALSE(c.fresh);
  EXPECT_EQ(c.data, a.data);
  EXPECT_EQ(c.fd, -1);  // the receiver has it mapped: no descriptor to send
  EXPECT_EQ(pool.idle_bytes(), 0u);
  // A different class does not take it.
  ASSERT_EQ(pool.Recycle(c.id), 0);
  PooledSegment d;
  ASSERT_EQ(pool.Acquire(100 * kKiB, &d), 0);
  EXPECT_NE(d.id, a.id);
  EXPECT_TRUE(d.fresh);
  EXPECT_EQ(pool.segments(), 3u);
  // A new segment's descriptor is the caller's to send and close.
  for (const PooledSegment* x : {&a, &b, &d}) CloseFd(x->fd);
}

TEST(SegmentPool, AcquireCopyFillsNewAndReusedSegments) {
  SegmentPool pool(64 * kKiB);
  std::vector<uint8_t> first(100 * kKiB);
  for (size_t i = 0; i < first.size(); i++) first[i] = static_cast<uint8_t>(i * 7 + 1);
  PooledSegment a;
  // A new segment is written by write(2): the bytes are in the memfd and in
  // the pool's mapping, and the rest of the class reads as zeros.
  ASSERT_EQ(pool.AcquireCopy(first.data(), first.size(), &a), 0);
  EXPECT_TRUE(a.fresh);
  EXPECT_EQ(a.capacity, 128 * kKiB);
  EXPECT_EQ(std::memcmp(a.data, first.data(), first.size()), 0);
  std::vector<uint8_t> through_fd(first.size());
  ASSERT_EQ(pread(a.fd, through_fd.data(), through_fd.size(), 0), static_cast<ssize_t>(through_fd.size()));
  EXPECT_EQ(through_fd, first);
  EXPECT_EQ(a.data[a.capacity - 1], 0);
  // Reused: the new bytes replace the old ones, through the same mapping.
  ASSERT_EQ(pool.Recycle(a.id), 0);
  std::vector<uint8_t> second(70 * kKiB, 0x5a);
  PooledSegment b;
  ASSERT_EQ(pool.AcquireCopy(second.data(), second.size(), &b), 0);
  EXPECT_FALSE(b.fresh);
  EXPECT_EQ(b.id, a.id);
  EXPECT_EQ(std::memcmp(b.data, second.data(), second.size()), 0);
  EXPECT_EQ(b.data[second.size()], first[second.size()]);  // past the message: the old bytes, never sent
  // Nothing to copy still makes a segment.
  PooledSegment c;
  ASSERT_EQ(pool.AcquireCopy(nullptr, 0, &c), 0);
  EXPECT_TRUE(c.fresh);
  EXPECT_EQ(pool.in_flight(), 2u);
  CloseFd(a.fd);
  CloseFd(c.fd);
}

TEST(SealedCopyOfSegment, CopiesTheBytesIntoASegmentAReceiverAccepts) {
  // A transferred segment whose strict seal the kernel refused: its bytes
  // go into a sealed copy, which a receiver verifies as any sealed segment.
  const size_t size = 3 * 4096 + 17;
  const int fd = CreateSegment(size);
  ASSERT_GE(fd, 0);
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; i++) bytes[i] = static_cast<uint8_t>(i * 13 + 5);
  ASSERT_EQ(pwrite(fd, bytes.data(), size, 0), static_cast<ssize_t>(size));
  const int copy = SealedCopyOfSegment(fd);
  ASSERT_GE(copy, 0);
  size_t verified = 0;
  EXPECT_EQ(VerifySegment(copy, &verified), 0);
  EXPECT_EQ(verified, size);
  std::vector<uint8_t> back(size);
  ASSERT_EQ(pread(copy, back.data(), size, 0), static_cast<ssize_t>(size));
  EXPECT_EQ(back, bytes);
  // The original is left as it was: still writable, not sealed.
  EXPECT_EQ(fcntl(fd, F_GET_SEALS) & F_SEAL_WRITE, 0);
  close(copy);
  close(fd);
  // An empty segment gives an empty sealed copy.
  const int empty = CreateSegment(0);
  ASSERT_GE(empty, 0);
  const int empty_copy = SealedCopyOfSegment(empty);
  ASSERT_GE(empty_copy, 0);
  EXPECT_EQ(VerifySegment(empty_copy, &verified), 0);
  EXPECT_EQ(verified, 0u);
  close(empty_copy);
  close(empty);
}

TEST(SegmentPool, SegmentSizeIsSealedButBytesAreWritable) {
  SegmentPool pool;
  PooledSegment s;
  ASSERT_EQ(pool.Acquire(10, &s), 0);
  EXPECT_EQ(ftruncate(s.fd, 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(ftruncate(s.fd, static_cast<off_t>(s.capacity * 2)), -1);
  // No further seal can be added (a receiver cannot freeze the sender out).
  EXPECT_EQ(fcntl(s.fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
  size_t size = 0;
  EXPECT_EQ(VerifyPooledSegment(s.fd, &size), 0);
  EXPECT_EQ(size, s.capacity);
  const char x = 'x';
  EXPECT_EQ(pwrite(s.fd, &x, 1, 0), 1);
  CloseFd(s.fd);
}

TEST(SegmentPool, BadHandBacksAreRefused) {
  SegmentPool pool;
  PooledSegment s;
  ASSERT_EQ(pool.Acquire(10, &s), 0);
  EXPECT_EQ(pool.Recycle(0), -EINVAL);
  EXPECT_EQ(pool.Recycle(s.id + 1000), -EINVAL);
  ASSERT_EQ(pool.Recycle(s.id), 0);
  // Twice: the second hand-back finds it idle already.
  EXPECT_EQ(pool.Recycle(s.id), -EINVAL);
  EXPECT_EQ(pool.in_flight(), 0u);
  EXPECT_EQ(pool.idle_bytes(), s.capacity);
  CloseFd(s.fd);
}

TEST(SegmentPool, IdleLimitDropsAndTrimForgets) {
  const size_t fds_before = CountFds();
  const size_t maps_before = CountMappings();
  {
    SegmentPool pool(64 * kKiB, 128 * kKiB);
    PooledSegment s[3];
    for (auto& x : s) {
      ASSERT_EQ(pool.Acquire(1, &x), 0);
      ASSERT_GE(x.fd, 0);
      CloseFd(x.fd);  // sent, as a channel does
    }
    // The pool keeps each segment's mapping and no descriptor of its own.
    EXPECT_EQ(CountFds(), fds_before);
    EXPECT_EQ(CountMappings(), maps_before + 3);
    EXPECT_EQ(pool.Recycle(s[0].id), 0);
    EXPECT_EQ(pool.Recycle(s[1].id), 0);
    // Over the idle limit: dropped, unmapped.
    EXPECT_EQ(pool.Recycle(s[2].id), 1);
    EXPECT_EQ(pool.segments(), 2u);
    EXPECT_EQ(CountMappings(), maps_before + 2);
    std::vector<uint32_t> dropped;
    pool.TrimIdle(&dropped);
    EXPECT_EQ(dropped.size(), 2u);
    EXPECT_EQ(pool.segments(), 0u);
    EXPECT_EQ(pool.idle_bytes(), 0u);
    EXPECT_EQ(CountMappings(), maps_before);
    PooledSegment again;
    ASSERT_EQ(pool.Acquire(1, &again), 0);
    EXPECT_TRUE(again.fresh);
    EXPECT_GT(again.id, s[2].id);  // ids are never reused
    CloseFd(again.fd);
  }
  EXPECT_EQ(CountFds(), fds_before);
  EXPECT_EQ(CountMappings(), maps_before);
}

TEST(SegmentPool, LimitsBoundBytesAndCount) {
  SegmentPool pool(64 * kKiB);
  pool.SetLimits(256 * kKiB, 3);
  PooledSegment a, b, c, d;
  ASSERT_EQ(pool.Acquire(1, &a), 0);
  ASSERT_EQ(pool.Acquire(1, &b), 0);
  ASSERT_EQ(pool.Acquire(128 * kKiB, &c), 0);
  EXPECT_EQ(pool.total_bytes(), 256 * kKiB);
  // Full by bytes, and by count: nothing new while all are in flight.
  EXPECT_EQ(pool.Acquire(1, &d), -ENOSPC);
  EXPECT_EQ(pool.Acquire(256 * kKiB, &d), -ENOSPC);
  EXPECT_EQ(pool.segments(), 3u);
  // An idle segment of the class is reused; one of another class is
  // dropped to make room, and its id is reported for the receiver.
  ASSERT_EQ(pool.Recycle(a.id), 0);
  ASSERT_EQ(pool.Acquire(10, &d), 0);
  EXPECT_EQ(d.id, a.id);
  ASSERT_EQ(pool.Recycle(c.id), 0);
  EXPECT_TRUE(pool.TakeDropped().empty());
  PooledSegment e;
  ASSERT_EQ(pool.Recycle(b.id), 0);
  ASSERT_EQ(pool.Acquire(200 * kKiB, &e), -ENOSPC);  // 256 KiB class: over the byte bound even when empty
  pool.SetLimits(512 * kKiB, 3);
  ASSERT_EQ(pool.Acquire(200 * kKiB, &e), 0);
  const std::vector<uint32_t> dropped = pool.TakeDropped();
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0], c.id);  // the largest idle one went first
  EXPECT_EQ(pool.segments(), 3u);
  EXPECT_LE(pool.total_bytes(), 512 * kKiB);
  EXPECT_TRUE(pool.TakeDropped().empty());
  for (const PooledSegment* x : {&a, &b, &c, &e}) CloseFd(x->fd);
}

TEST(Segments, TransferSealsStrictAndTrusting) {
  const size_t size = 64 * kKiB;
  // Trusting: sealed while the sender's writable mapping still exists.
  int fd = CreateSegment(size);
  ASSERT_GE(fd, 0);
  int err = 0;
  void* p = MapSegment(fd, size, /*shared=*/true, &err);
  ASSERT_NE(p, nullptr);
  std::memset(p, 7, size);
  ASSERT_EQ(SealTransferred(fd, /*strict=*/false), 0);
  size_t got = 0;
  EXPECT_EQ(VerifySegment(fd, &got), -EPERM);  // a strict receiver refuses it
  ASSERT_EQ(VerifySegment(fd, &got, /*accept_future_write=*/true), 0);
  EXPECT_EQ(got, size);
  // No new writable mapping and no write(2) once sealed.
  EXPECT_EQ(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), MAP_FAILED);
  const char x = 'x';
  EXPECT_EQ(pwrite(fd, &x, 1, 0), -1);
  EXPECT_EQ(ftruncate(fd, 0), -1);
  UnmapSegment(p, size);
  CloseFd(fd);
  // Strict: refused while mapped, granted once the mapping is gone.
  fd = CreateSegment(size);
  ASSERT_GE(fd, 0);
  p = MapSegment(fd, size, /*shared=*/true, &err);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(SealTransferred(fd, /*strict=*/true), -EBUSY);
  UnmapSegment(p, size);
  ASSERT_EQ(SealTransferred(fd, /*strict=*/true), 0);
  EXPECT_EQ(VerifySegment(fd, &got), 0);
  EXPECT_EQ(SealTransferred(fd, /*strict=*/true), -EPERM);  // sealed for good
  CloseFd(fd);
}

TEST(SegmentAnnouncement, RoundTripsAndRejectsMalformedPayloads) {
  const SegmentEntry in[3] = {{protocol::kSegmentSealed, 0, 0},
                              {protocol::kSegmentPooledNew, 7, 65536},
                              {protocol::kSegmentPooled, 0xfffffffeu, 1}};
  std::vector<uint8_t> buf(SegmentAnnouncementSize(3));
  ASSERT_EQ(buf.size(), 2 + 3 * protocol::kSegmentEntrySize);
  EncodeSegmentAnnouncement(in, 3, buf.data());
  EXPECT_EQ(buf[0], protocol::kPooledSegmentsControlByte);
  std::vector<SegmentEntry> out;
  size_t fds = 99;
  ASSERT_TRUE(ParseSegmentAnnouncement(buf.data(), buf.size(), &out, &fds));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(fds, 2u);  // the sealed and the new one carry descriptors
  for (size_t i = 0; i < 3; i++) {
    EXPECT_EQ(out[i].kind, in[i].kind);
    EXPECT_EQ(out[i].id, in[i].id);
    EXPECT_EQ(out[i].length, in[i].length);
  }
  // One byte short or long, a wrong count, an unknown kind, the wrong byte.
  EXPECT_FALSE(ParseSegmentAnnouncement(buf.data(), buf.size() - 1, &out, &fds));
  std::vector<uint8_t> longer = buf;
  longer.push_back(0);
  EXPECT_FALSE(ParseSegmentAnnouncement(longer.data(), longer.size(), &out, &fds));
  std::vector<uint8_t> bad = buf;
  bad[1] = 0;
  EXPECT_FALSE(ParseSegmentAnnouncement(bad.data(), bad.size(), &out, &fds));
  bad = buf;
  bad[2 + protocol::kSegmentEntrySize] = 3;
  EXPECT_FALSE(ParseSegmentAnnouncement(bad.data(), bad.size(), &out, &fds));
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(fds, 0u);
  bad = buf;
  bad[0] = protocol::kSegmentsControlByte;
  EXPECT_FALSE(ParseSegmentAnnouncement(bad.data(), bad.size(), &out, &fds));
  EXPECT_FALSE(ParseSegmentAnnouncement(buf.data(), 0, &out, &fds));
  EXPECT_FALSE(ParseSegmentAnnouncement(buf.data(), 1, &out, &fds));
  // 65 entries: over the limit even when the size matches.
  std::vector<SegmentEntry> many(65, SegmentEntry{protocol::kSegmentPooled, 1, 1});
  std::vector<uint8_t> big(SegmentAnnouncementSize(65));
  EncodeSegmentAnnouncement(many.data(), 65, big.data());
  EXPECT_FALSE(ParseSegmentAnnouncement(big.data(), big.size(), &out, &fds));
  // Random bytes never crash and never yield more entries than fit.
  std::mt19937 rng(7);
  for (int round = 0; round < 100000; round++) {
    std::vector<uint8_t> junk(rng() % 40);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    if (!junk.empty() && rng() % 2 == 0) junk[0] = protocol::kPooledSegmentsControlByte;
    if (ParseSegmentAnnouncement(junk.data(), junk.size(), &out, &fds)) {
      EXPECT_EQ(junk.size(), SegmentAnnouncementSize(out.size()));
      EXPECT_LE(fds, out.size());
    }
  }
}

// Counts the descriptors Inbound closes (numbers, never real descriptors).
class CountingCloser final : public DescriptorCloser {
 public:
  void Close(int /*fd*/) override { closed++; }
  int closed = 0;
};

TEST(InboundPooled, AnnouncementHandsEntriesAndTheirDescriptorsToTheMessage) {
  const SegmentEntry entries[3] = {{protocol::kSegmentPooledNew, 5, 100},
                                   {protocol::kSegmentPooled, 4, 10},
                                   {protocol::kSegmentSealed, 0, 0}};
  std::vector<uint8_t> control(SegmentAnnouncementSize(3));
  EncodeSegmentAnnouncement(entries, 3, control.data());
  const uint8_t message[] = {0xff, 0x0f};
  {
    // Not offered: the announcement closes the channel.
    CountingCloser closer;
    Inbound in(&closer);
    in.AcceptSegments();
    Inbound::Frame f;
    EXPECT_EQ(in.OnFrame(control.data(), control.size(), Inbound::Source::kSocket, &f),
              Inbound::Status::kError);
    EXPECT_EQ(in.error(), InboundError::kUnexpectedPooledAnnouncement);
  }
  CountingCloser closer;
  Inbound in(&closer);
  in.AcceptSegments();
  in.AcceptPooledSegments();
  std::vector<int> fds = {1001, 1002};
  ASSERT_EQ(in.Receive(&fds), Inbound::Status::kOk);
  Inbound::Frame f;
  ASSERT_EQ(in.OnFrame(control.data(), control.size(), Inbound::Source::kSocket, &f), Inbound::Status::kOk);
  EXPECT_EQ(f.kind, Inbound::FrameKind::kSegmentAnnouncement);
  ASSERT_EQ(in.OnFrame(message, sizeof(message), Inbound::Source::kSocket, &f), Inbound::Status::kOk);
  EXPECT_EQ(f.kind, Inbound::FrameKind::kMessage);
  EXPECT_EQ(f.fds, (std::vector<int>{1001, 1002}));  // the new and the sealed one, in entry order
  ASSERT_EQ(f.entries.size(), 3u);
  EXPECT_EQ(f.entries[1].id, 4u);
  // The next message has none; only recycled ones need no descriptor.
  ASSERT_EQ(in.OnFrame(message, sizeof(message), Inbound::Source::kSocket, &f), Inbound::Status::kOk);
  EXPECT_TRUE(f.fds.empty() && f.entries.empty());
  const SegmentEntry known = {protocol::kSegmentPooled, 4, 10};
  std::vector<uint8_t> no_fds(SegmentAnnouncementSize(1));
  EncodeSegmentAnnouncement(&known, 1, no_fds.data());
  ASSERT_EQ(in.OnFrame(no_fds.data(), no_fds.size(), Inbound::Source::kSocket, &f), Inbound::Status::kOk);
  ASSERT_EQ(in.OnFrame(message, sizeof(message), Inbound::Source::kSocket, &f), Inbound::Status::kOk);
  EXPECT_EQ(f.entries.size(), 1u);
  EXPECT_TRUE(f.fds.empty());
  // Descriptors missing, then a malformed one: errors, nothing leaked.
  ASSERT_EQ(in.OnFrame(control.data(), control.size(), Inbound::Source::kSocket, &f),
            Inbound::Status::kError);
  EXPECT_EQ(in.error(), InboundError::kAnnouncementWithoutDescriptors);
  EXPECT_EQ(closer.closed, 0);
}

TEST(InboundPooled, MalformedAnnouncementsFail) {
  CountingCloser closer;
  Inbound in(&closer);
  in.AcceptSegments();
  in.AcceptPooledSegments();
  const uint8_t bad[] = {protocol::kPooledSegmentsControlByte, 1, 9, 0, 0, 0, 1, 0, 0, 0, 1};
  Inbound::Frame f;
  EXPECT_EQ(in.OnFrame(bad, sizeof(bad), Inbound::Source::kSocket, &f), Inbound::Status::kError);
  EXPECT_EQ(in.error(), InboundError::kMalformedAnnouncement);
}

TEST(SegmentCache, AcceptsOnlySizeSealedMemfds) {
  SegmentCache cache;
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  EXPECT_EQ(cache.Add(1, p[0]), -EPERM);
  close(p[0]);
  close(p[1]);
  const int loose = CreateSegment(4096);
  ASSERT_GE(loose, 0);
  EXPECT_EQ(cache.Add(1, loose), -EPERM);  // could be truncated under us
  close(loose);
  SegmentPool pool;
  PooledSegment s;
  ASSERT_EQ(pool.Acquire(100, &s), 0);
  std::memcpy(s.data, "pooled", 6);
  ASSERT_EQ(cache.Add(s.id, s.fd), 0);
  EXPECT_EQ(cache.Add(s.id, s.fd), -EEXIST);
  size_t size = 0;
  uint8_t* m = cache.Find(s.id, &size);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(size, s.capacity);
  EXPECT_EQ(std::memcmp(m, "pooled", 6), 0);
  // Shared both ways: the next message in the same segment is seen.
  std::memcpy(s.data, "second", 6);
  EXPECT_EQ(std::memcmp(m, "second", 6), 0);
  EXPECT_EQ(cache.Find(s.id + 1, &size), nullptr);
  EXPECT_EQ(size, 0u);
  EXPECT_TRUE(cache.Remove(s.id));
  EXPECT_FALSE(cache.Remove(s.id));
  CloseFd(s.fd);
}

// Wire messages of the two-process test, fixed size.
struct Offer {
  uint32_t id;
  uint32_t fresh;
  uint64_t size;
  uint64_t seed;
};
struct HandBack {
  uint32_t id;
  uint32_t forget;  // 1: the sender dropped this id (reply to nothing)
};

bool WaitReadable(int fd) {
  pollfd p{fd, POLLIN, 0};
  int r;
  do {
    r = poll(&p, 1, kWaitMs);
  } while (r < 0 && errno == EINTR);
  return r == 1;
}

// Positions checked in each message: the first and last bytes and a few in
// between, so a 1 MiB message is verified without reading all of it.
std::vector<size_t> Probes(size_t size, uint64_t seed) {
  std::vector<size_t> v = {0, size - 1, size / 2};
  for (int i = 0; i < 4; i++) v.push_back(static_cast<size_t>((seed * 2654435761u + i * 40503u) % size));
  return v;
}
uint8_t ProbeByte(uint64_t seed, size_t pos) { return static_cast<uint8_t>(seed ^ (pos * 31)); }

// The receiver: maps fresh segments into its cache, checks each message,
// hands the id back. Exits 0 after `cycles` messages with as many
// descriptors and mappings as it had once its cache was built.
int ReceiverMain(int sock, uint64_t cycles) {
  SegmentCache cache;
  size_t fds_at_warm = 0;
  size_t maps_at_warm = 0;
  for (uint64_t i = 0; i < cycles; i++) {
    Offer o;
    std::vector<int> fds;
    size_t got = 0;
    while (got < sizeof(o)) {
      if (!WaitReadable(sock)) return 20;
      const ReadOutcome r = ReceiveWithFds(sock, reinterpret_cast<uint8_t*>(&o) + got, sizeof(o) - got, &fds);
      if (r.bytes <= 0) return 21;
      got += static_cast<size_t>(r.bytes);
    }
    if (o.fresh) {
      if (fds.size() != 1) return 22;
      if (cache.Add(o.id, fds[0]) != 0) return 23;
    } else if (!fds.empty()) {
      return 24;
    }
    for (int fd : fds) CloseFd(fd);
    size_t size = 0;
    const uint8_t* m = cache.Find(o.id, &size);
    if (m == nullptr || o.size > size) return 25;
    for (size_t pos : Probes(o.size, o.seed)) {
      if (m[pos] != ProbeByte(o.seed, pos)) return 26;
    }
    if (i == 1000) {
      fds_at_warm = CountFds();
      maps_at_warm = CountMappings();
    }
    const HandBack h{o.id, 0};
    iovec iov{const_cast<HandBack*>(&h), sizeof(h)};
    if (SendVectors(sock, &iov, 1, nullptr, 0) != static_cast<ssize_t>(sizeof(h))) return 27;
  }
  if (CountFds() != fds_at_warm) return 28;
  if (CountMappings() != maps_at_warm) return 29;
  return 0;
}

TEST(SegmentPoolProcesses, HundredThousandCyclesLeakNothing) {
  const uint64_t cycles = 100000;
  int sv[2];
  ASSERT_EQ(MakeSocketPair(sv), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    CloseFd(sv[0]);
    _exit(ReceiverMain(sv[1], cycles));
  }
  CloseFd(sv[1]);
  const int sock = sv[0];
  std::mt19937_64 rng(99);
  const size_t sizes[] = {1, 4 * kKiB, 64 * kKiB, 100 * kKiB, kKiB * kKiB};
  size_t fds_at_warm = 0;
  size_t maps_at_warm = 0;
  bool ok = true;
  {
    SegmentPool pool(64 * kKiB, 8 * kKiB * kKiB);
    for (uint64_t i = 0; i < cycles && ok; i++) {
      const size_t size = sizes[rng() % 5];
      const uint64_t seed = rng();
      PooledSegment s;
      ASSERT_EQ(pool.Acquire(size, &s), 0);
      for (size_t pos : Probes(size, seed)) s.data[pos] = ProbeByte(seed, pos);
      const Offer o{s.id, s.fresh ? 1u : 0u, size, seed};
      iovec iov{const_cast<Offer*>(&o), sizeof(o)};
      ASSERT_EQ(SendVectors(sock, &iov, 1, s.fresh ? &s.fd : nullptr, s.fresh ? 1 : 0),
                static_cast<ssize_t>(sizeof(o)));
      if (s.fresh) CloseFd(s.fd);  // the receiver has its own now
      HandBack h;
      size_t got = 0;
      while (got < sizeof(h) && ok) {
        ok = WaitReadable(sock);
        if (!ok) break;
        const ReadOutcome r =
            ReceiveWithFds(sock, reinterpret_cast<uint8_t*>(&h) + got, sizeof(h) - got, nullptr);
        ok = r.bytes > 0;
        if (ok) got += static_cast<size_t>(r.bytes);
      }
      if (!ok) break;
      ASSERT_EQ(h.id, s.id);
      ASSERT_EQ(pool.Recycle(h.id), 0);
      if (i == 1000) {
        fds_at_warm = CountFds();
        maps_at_warm = CountMappings();
      }
    }
    EXPECT_EQ(CountMappings(), pool.segments());
    // One message at a time: one segment per size class was ever needed.
    EXPECT_EQ(pool.segments(), 3u);  // 64 KiB, 128 KiB and 1 MiB classes
    EXPECT_EQ(CountFds(), fds_at_warm);
    EXPECT_EQ(CountMappings(), maps_at_warm);
  }
  CloseFd(sock);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(ok) << "receiver stopped answering";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace procwire
