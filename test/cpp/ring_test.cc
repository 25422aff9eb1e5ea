// Tests for the shared-memory ring (src/core/ring.h): record layout and
// wrap-around at every offset, a full ring, records too large for the ring,
// the sleep/wake handshake, real processes streaming and ping-ponging frames
// while sleeping and waking, a writer killed mid-record, and hostile ring
// contents (which must give errors, never out-of-range accesses).
#include "ring.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "frame_reader.h"
#include "wake.h"

namespace procwire {
namespace {

// Any wait longer than this is a lost wake-up (or a broken build): the
// tests fail instead of hanging.
constexpr int kWaitMs = 5000;

// ---- the tests' own wake-ups and spinning ------------------------------------

// A wake-up link (src/core/wake.h) used as the tests' event-loop style
// signal: one end waited on, the other signalled; after fork() both
// processes hold both ends.
struct Link {
  int wait = -1;
  int signal = -1;
  void Close() {
    if (wait >= 0) close(wait);
    if (signal >= 0) close(signal);
    wait = signal = -1;
  }
};

Link MakeLink() {
  Link l;
  if (WakeLinkCreate(&l.wait, &l.signal) != 0) l.wait = l.signal = -1;
  return l;
}

void LinkSignal(const Link& l) { WakeLinkSignal(l.signal); }

void LinkDrain(const Link& l) { WakeLinkDrain(l.wait, 64); }

// 1 when the link is readable within timeout_ms, 0 on timeout.
int LinkWait(const Link& l, int timeout_ms) {
  struct pollfd p = {l.wait, POLLIN, 0};
  for (;;) {
    const int r = poll(&p, 1, timeout_ms);
    if (r > 0) return 1;
    if (r == 0) return 0;
    if (errno != EINTR) return -errno;
  }
}

// A futex on a ring's sleep word (process-shared), for the tests whose
// sides are blocking threads or processes rather than event loops.
int FutexWait(std::atomic<uint32_t>* word, uint32_t expected, int timeout_ms) {
  struct timespec ts = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  const long r = syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
  if (r == 0 || errno == EAGAIN) return 0;
  return -errno;
}

void FutexWake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

// A spin budget for the tests' spinning sides: it doubles when spinning
// found the ring ready and halves when it did not (16 to 16384 pauses).
class SpinBudget {
 public:
  uint32_t budget() const { return budget_; }
  void Succeeded() { budget_ = budget_ >= 8192 ? 16384 : budget_ * 2; }
  void Failed() { budget_ = budget_ <= 32 ? 16 : budget_ / 2; }
  static void Pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
  }

 private:
  uint32_t budget_ = 1024;
};
constexpr size_t kSmall = 4096;

uint64_t NowMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// The stress tests' size: PROCWIRE_RING_STRESS multiplies it (default 1).
uint64_t StressScale() {
  const char* s = std::getenv("PROCWIRE_RING_STRESS");
  const long v = s ? std::atol(s) : 1;
  return v > 0 ? static_cast<uint64_t>(v) : 1;
}

uint8_t PatternByte(uint64_t seq, size_t i) { return static_cast<uint8_t>(seq * 131 + i * 7 + 1); }

// One advanced-format frame: u32 big-endian length, then the payload, whose
// first 8 bytes are the sequence number and the rest a pattern derived from
// it, so any torn or stale byte is noticed.
std::vector<uint8_t> MakeFrame(uint64_t seq, size_t payload) {
  if (payload < 8) payload = 8;
  std::vector<uint8_t> f(kAdvancedHeaderSize + payload);
  WriteU32BigEndian(f.data(), static_cast<uint32_t>(payload));
  std::memcpy(f.data() + kAdvancedHeaderSize, &seq, 8);
  for (size_t i = 8; i < payload; i++) f[kAdvancedHeaderSize + i] = PatternByte(seq, i);
  return f;
}

// Checks that a record holds exactly whole frames, in sequence from
// *next_seq, each with its pattern intact. Returns false on any mismatch.
bool CheckFrames(const uint8_t* data, size_t size, uint64_t* next_seq) {
  size_t pos = 0;
  while (pos < size) {
    const ParseResult r = ParseFrame(WireFormat::kAdvanced, data + pos, size - pos, 1 << 20);
    if (r.status != ParseResult::Status::kOk || r.payload_size < 8) return false;
    const uint8_t* p = data + pos + r.payload_offset;
    uint64_t seq;
    std::memcpy(&seq, p, 8);
    if (seq != *next_seq) return false;
    for (size_t i = 8; i < r.payload_size; i++) {
      if (p[i] != PatternByte(seq, i)) return false;
    }
    ++*next_seq;
    pos += r.consumed;
  }
  return pos == size;
}

bool InData(const RingMapping& m, const uint8_t* p, size_t n) {
  return p >= m.data() && n <= m.capacity() && static_cast<size_t>(p - m.data()) <= m.capacity() - n;
}

// ---- creation and attachment ----------------------------------------------

TEST(RingMapping, CreateRejectsBadCapacities) {
  RingMapping m;
  EXPECT_EQ(m.Create(0), -EINVAL);
  EXPECT_EQ(m.Create(kRingMinCapacity / 2), -EINVAL);
  EXPECT_EQ(m.Create(kSmall + 8), -EINVAL);
  EXPECT_EQ(m.Create(kRingMaxCapacity * 2), -EINVAL);
  EXPECT_FALSE(m.mapped());
  ASSERT_EQ(m.Create(kSmall), 0);
  EXPECT_TRUE(m.mapped());
  EXPECT_EQ(m.capacity(), kSmall);
  EXPECT_GE(m.fd(), 0);
}

TEST(RingMapping, AttachSeesTheSameRing) {
  RingMapping a;
  ASSERT_EQ(a.Create(kSmall), 0);
  RingMapping b;
  ASSERT_EQ(b.Attach(a.fd()), 0);
  EXPECT_EQ(b.capacity(), kSmall);
  EXPECT_EQ(b.fd(), -1);  // borrowed, not owned
  RingWriter w(&a);
  RingReader r(&b);
  const uint8_t msg[] = "hello";
  ASSERT_EQ(w.Write(msg, sizeof(msg)), RingStatus::kOk);
  const uint8_t* d = nullptr;
  size_t n = 0;
  ASSERT_EQ(r.Peek(&d, &n), RingStatus::kOk);
  ASSERT_EQ(n, sizeof(msg));
  EXPECT_EQ(std::memcmp(d, msg, n), 0);
  EXPECT_TRUE(InData(b, d, n));
  r.Consume();
  EXPECT_EQ(r.Peek(&d, &n), RingStatus::kNeedMore);
  // The writer sees the space come back.
  EXPECT_EQ(a.header()->tail.load(), w.head());
}

TEST(RingMapping, AttachRejectsWhatIsNotARing) {
  RingMapping m;
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  EXPECT_EQ(m.Attach(p[0]), -EPROTO);
  close(p[0]);
  close(p[1]);

  // A memfd of the right size whose size is not sealed.
  const int loose = static_cast<int>(syscall(SYS_memfd_create, "t", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_GE(loose, 0);
  ASSERT_EQ(ftruncate(loose, kRingHeaderSize + kSmall), 0);
  EXPECT_EQ(m.Attach(loose), -EPROTO);
  // Sealed, but with no ring header in it.
  ASSERT_EQ(fcntl(loose, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
  EXPECT_EQ(m.Attach(loose), -EPROTO);
  close(loose);

  // A sealed memfd whose data area is not a power of two.
  const int odd = static_cast<int>(syscall(SYS_memfd_create, "t", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_GE(odd, 0);
  ASSERT_EQ(ftruncate(odd, kRingHeaderSize + kSmall + 64), 0);
  ASSERT_EQ(fcntl(odd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
  EXPECT_EQ(m.Attach(odd), -EPROTO);
  close(odd);

  // A real ring whose header lies about its capacity, version or magic.
  for (int field = 0; field < 3; field++) {
    RingMapping real;
    ASSERT_EQ(real.Create(kSmall), 0);
    if (field == 0) real.header()->capacity = kSmall * 2;
    if (field == 1) real.header()->version = kRingVersion + 1;
    if (field == 2) real.header()->magic ^= 1;
    EXPECT_EQ(m.Attach(real.fd()), -EPROTO) << "field " << field;
    EXPECT_FALSE(m.mapped());
  }
  EXPECT_EQ(m.Attach(-1), -EBADF);
}

TEST(RingMapping, SizeCannotBeChangedByThePeer) {
  RingMapping m;
  ASSERT_EQ(m.Create(kSmall), 0);
  // Truncation would make our accesses fault with SIGBUS; the seals forbid it.
  EXPECT_EQ(ftruncate(m.fd(), 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(ftruncate(m.fd(), kRingHeaderSize + kSmall * 2), -1);
  const int fd = m.TakeFd();
  EXPECT_EQ(m.fd(), -1);
  close(fd);
  // The mapping outlives the descriptor.
  RingWriter w(&m);
  EXPECT_EQ(w.Write(reinterpret_cast<const uint8_t*>("x"), 1), RingStatus::kOk);
}

// ---- single-process behaviour -------------------------------------------------

TEST(Ring, WrapAroundAtEveryOffset) {
  const size_t max = RingMaxRecordPayload(kSmall);
  const size_t sizes[] = {0, 1, 7, 8, 9, 100, 1000, max - 1, max};
  for (size_t start = 0; start < kSmall; start += 8) {
    RingMapping m;
    ASSERT_EQ(m.Create(kSmall), 0);
    RingWriter w(&m);
    RingReader r(&m);
    // Move both ends to `start` with filler records of exactly that size.
    size_t pos = 0;
    while (pos < start) {
      const size_t space = std::min<size_t>(start - pos, 2048);
      std::vector<uint8_t> filler(space - kRingRecordHeaderSize, 0xee);
      ASSERT_EQ(w.Write(filler.data(), filler.size()), RingStatus::kOk);
      const uint8_t* d;
      size_t n;
      ASSERT_EQ(r.Peek(&d, &n), RingStatus::kOk);
      r.Consume();
      pos += space;
    }
    ASSERT_EQ(w.head() % kSmall, start);
    for (size_t size : sizes) {
      // Two records, so the second starts wherever the first ended.
      for (int k = 0; k < 2; k++) {
        std::vector<uint8_t> msg(size);
        for (size_t i = 0; i < size; i++) msg[i] = PatternByte(start + k, i);
        ASSERT_EQ(w.Write(msg.data(), size), RingStatus::kOk) << "start " << start << " size " << size;
        const uint8_t* d = nullptr;
        size_t n = 0;
        ASSERT_EQ(r.Peek(&d, &n), RingStatus::kOk) << "start " << start << " size " << size;
        ASSERT_EQ(n, size);
        ASSERT_TRUE(InData(m, d, n));
        ASSERT_TRUE(size == 0 || std::memcmp(d, msg.data(), size) == 0);
        r.Consume();
      }
    }
    const uint8_t* d;
    size_t n;
    EXPECT_EQ(r.Peek(&d, &n), RingStatus::kNeedMore);
    EXPECT_EQ(r.error(), RingError::kNone);
    EXPECT_EQ(w.error(), RingError::kNone);
  }
}

TEST(Ring, FullRingThenSpaceAgain) {
  RingMapping m;
  ASSERT_EQ(m.Create(kSmall), 0);
  RingWriter w(&m);
  RingReader r(&m);
  const uint8_t msg[56] = {1};
  size_t written = 0;
  while (w.Write(msg, sizeof(msg)) == RingStatus::kOk) written++;
  // 56 bytes + 8 of header = 64 per record: exactly a ring's worth.
  EXPECT_EQ(written, kSmall / 64);
  EXPECT_EQ(w.error(), RingError::kNone);
  EXPECT_EQ(w.Write(msg, 0), RingStatus::kNeedMore);
  // The writer may sleep: nothing can change until the reader consumes.
  EXPECT_TRUE(w.PrepareToSleep(sizeof(msg)));
  const uint8_t* d;
  size_t n;
  ASSERT_EQ(r.Peek(&d, &n), RingStatus::kOk);
  r.Consume();
  // The reader owes the sleeping writer exactly one signal.
  EXPECT_TRUE(r.NeedsWake());
  EXPECT_FALSE(r.NeedsWake());
  w.DoneSleeping();
  EXPECT_EQ(w.Write(msg, sizeof(msg)), RingStatus::kOk);
  EXPECT_EQ(w.Write(msg, sizeof(msg)), RingStatus::kNeedMore);
  size_t read = 0;
  while (r.Peek(&d, &n) == RingStatus::kOk) {
    r.Consume();
    read++;
  }
  EXPECT_EQ(read, written);
  EXPECT_EQ(r.error(), RingError::kNone);
}

TEST(Ring, NotEnoughRoomBeforeTheEndWaitsForTheWrap) {
  RingMapping m;
  ASSERT_EQ(m.Create(kSmall), 0);
  RingWriter w(&m);
  RingReader r(&m);
  std::vector<uint8_t> big(2000, 3);
  // Occupy [0, 2008) and [2008, 4016); 80 bytes remain before the end.
  ASSERT_EQ(w.Write(big.data(), big.size()), RingStatus::kOk);
  ASSERT_EQ(w.Write(big.data(), big.size()), RingStatus::kOk);
  // A 100-byte record needs a wrap (80 bytes) and 112 bytes at the start,
  // which is still occupied.
  EXPECT_EQ(w.Write(big.data(), 100), RingStatus::kNeedMore);
  const uint8_t* d;
  size_t n;
  ASSERT_EQ(r.Peek(&d, &n), RingStatus::kOk);
  r.Consume();
  ASSERT_EQ(w.Write(big.data(), 100), RingStatus::kOk);
  ASSERT_EQ(r.Peek(&d, &n), RingStatus::kOk);
  EXPECT_EQ(n, 2000u);
  r.Consume();
  ASSERT_EQ(r.Peek(&d, &n), RingStatus::kOk);
  EXPECT_EQ(n, 100u);
  EXPECT_EQ(d, m.data() + kRingRecordHeaderSize);  // after the wrap, at the start
  r.Consume();
  EXPECT_EQ(r.Peek(&d, &n), RingStatus::kNeedMore);
}

TEST(Ring, RecordLargerThanAllowedIsRejectedWithoutHarm) {
  RingMapping m;
  ASSERT_EQ(m.Create(kSmall), 0);
  RingWriter w(&m);
  RingReader r(&m);
  const size_t max = w.max_payload();
  EXPECT_EQ(max, kSmall / 2 - kRingRecordHeaderSize);
  std::vector<uint8_t> big(kSmall * 2, 9);
  for (size_t size : {max + 1, kSmall, kSmall * 2}) {
    uint8_t* out = nullptr;
    EXPECT_EQ(w.Reserve(size, &out), RingStatus::kError);
    EXPECT_EQ(w.error(), RingError::kTooLarge);
  }
  // Not sticky: the next record goes through, and nothing was published.
  const uint8_t* d;
  size_t n;
  EXPECT_EQ(r.Peek(&d, &n), RingStatus::kNeedMore);
  ASSERT_EQ(w.Write(big.data(), max), RingStatus::kOk);
  EXPECT_EQ(w.error(), RingError::kNone);
  ASSERT_EQ(r.Peek(&d, &n), RingStatus::kOk);
  EXPECT_EQ(n, max);
}

TEST(Ring, ReserveCommitShorterThanReserved) {
  RingMapping m;
  ASSERT_EQ(m.Create(kSmall), 0);
  RingWriter w(&m);
  RingReader r(&m);
  uint8_t* out = nullptr;
  ASSERT_EQ(w.Reserve(500, &out), RingStatus::kOk);
  ASSERT_TRUE(InData(m, out, 500));
  std::memcpy(out, "abc", 3);
  w.Commit(3);
  ASSERT_EQ(w.Write(reinterpret_cast<const uint8_t*>("de"), 2), RingStatus::kOk);
  const uint8_t* d;
  size_t n;
  ASSERT_EQ(r.Peek(&d, &n), RingStatus::kOk);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(d), n), "abc");
  r.Consume();
  ASSERT_EQ(r.Peek(&d, &n), RingStatus::kOk);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(d), n), "de");
}

TEST(Ring, CommitWithoutReservationPublishesNothing) {
  RingMapping m;
  ASSERT_EQ(m.Create(kSmall), 0);
  RingWriter w(&m);
  RingReader r(&m);
  const uint8_t msg[56] = {7};
  while (w.Write(msg, sizeof(msg)) == RingStatus::kOk) {
  }
  const uint64_t head = w.head();
  // Full: the failed Reserve leaves nothing to commit, so the unread records
  // are not overwritten; nor does a second Commit after a successful one.
  uint8_t* out = nullptr;
  ASSERT_EQ(w.Reserve(sizeof(msg), &out), RingStatus::kNeedMore);
  w.Commit(sizeof(msg));
  EXPECT_EQ(w.head(), head);
  size_t read = 0;
  const uint8_t* d;
  size_t n;
  while (r.Peek(&d, &n) == RingStatus::kOk) {
    EXPECT_EQ(n, sizeof(msg));
    EXPECT_EQ(d[0], 7);
    r.Consume();
    read++;
  }
  EXPECT_EQ(read, kSmall / 64);
  ASSERT_EQ(w.Reserve(3, &out), RingStatus::kOk);
  w.Commit(3);
  w.Commit(3);
  ASSERT_EQ(r.Peek(&d, &n), RingStatus::kOk);
  r.Consume();
  EXPECT_EQ(r.Peek(&d, &n), RingStatus::kNeedMore);
}

TEST(Ring, RandomOperationsMatchAQueue) {
  RingMapping m;
  ASSERT_EQ(m.Create(kSmall), 0);
  RingWriter w(&m);
  RingReader r(&m);
  std::mt19937_64 rng(15);
  std::deque<std::vector<uint8_t>> model;
  size_t used = 0;  // bytes of data records in the model, headers included
  for (int op = 0; op < 200000; op++) {
    if (rng() % 2 == 0) {
      const size_t size = rng() % 3 == 0 ? rng() % (w.max_payload() + 1) : rng() % 64;
      std::vector<uint8_t> msg(size);
      for (auto& b : msg) b = static_cast<uint8_t>(rng());
      const RingStatus s = w.Write(msg.data(), size);
      ASSERT_NE(s, RingStatus::kError);
      if (s == RingStatus::kOk) {
        used += 8 + ((size + 7) & ~size_t{7});
        model.push_back(std::move(msg));
      } else {
        // An empty ring always has room for a record of the allowed size
        // (after at most one wrap), so full means records are in flight.
        ASSERT_FALSE(model.empty());
        ASSERT_GT(used, 0u);
      }
    } else {
      const uint8_t* d;
      size_t n;
      const RingStatus s = r.Peek(&d, &n);
      ASSERT_NE(s, RingStatus::kError);
      if (model.empty()) {
        ASSERT_EQ(s, RingStatus::kNeedMore);
        continue;
      }
      ASSERT_EQ(s, RingStatus::kOk);
      ASSERT_EQ(n, model.front().size());
      ASSERT_TRUE(InData(m, d, n));
      ASSERT_TRUE(n == 0 || std::memcmp(d, model.front().data(), n) == 0);
      used -= 8 + ((n + 7) & ~size_t{7});
      model.pop_front();
      r.Consume();
    }
  }
}

TEST(Ring, SleepHandshakeInOneProcess) {
  RingMapping m;
  ASSERT_EQ(m.Create(kSmall), 0);
  RingWriter w(&m);
  RingReader r(&m);
  // Nothing announced: a write owes no signal.
  ASSERT_EQ(w.Write(reinterpret_cast<const uint8_t*>("a"), 1), RingStatus::kOk);
  EXPECT_FALSE(w.NeedsWake());
  // Data is there: the reader must not sleep, and withdraws its announcement.
  EXPECT_FALSE(r.PrepareToSleep());
  EXPECT_EQ(m.header()->consumer_sleeping.load(), 0u);
  const uint8_t* d;
  size_t n;
  ASSERT_EQ(r.Peek(&d, &n), RingStatus::kOk);
  r.Consume();
  // Empty: it may sleep, and the next write owes exactly one signal.
  EXPECT_TRUE(r.PrepareToSleep());
  ASSERT_EQ(w.Write(reinterpret_cast<const uint8_t*>("b"), 1), RingStatus::kOk);
  EXPECT_TRUE(w.NeedsWake());
  EXPECT_FALSE(w.NeedsWake());
  r.DoneSleeping();
  ASSERT_EQ(r.Peek(&d, &n), RingStatus::kOk);
  EXPECT_EQ(*d, 'b');
}

// The writer stamps the moment it takes a sleep announcement, so the woken
// reader can tell how long the ring really stayed empty from how long the
// scheduler took to run it again; a write that owes no signal stamps nothing.
TEST(Ring, WakeUpIsStampedWhenTheWriterTakesTheAnnouncement) {
  RingMapping m;
  ASSERT_EQ(m.Create(kSmall), 0);
  RingWriter w(&m);
  RingReader r(&m);
  EXPECT_EQ(r.WokenNs(), 0u);
  ASSERT_EQ(w.Write(reinterpret_cast<const uint8_t*>("a"), 1), RingStatus::kOk);
  EXPECT_FALSE(w.NeedsWake());
  EXPECT_EQ(r.WokenNs(), 0u);
  const uint8_t* d;
  size_t n;
  ASSERT_EQ(r.Peek(&d, &n), RingStatus::kOk);
  r.Consume();
  ASSERT_TRUE(r.PrepareToSleep());
  const uint64_t before = MonotonicNs();
  ASSERT_EQ(w.Write(reinterpret_cast<const uint8_t*>("b"), 1), RingStatus::kOk);
  ASSERT_TRUE(w.NeedsWake());
  const uint64_t after = MonotonicNs();
  EXPECT_GE(r.WokenNs(), before);
  EXPECT_LE(r.WokenNs(), after);
}

// The writer's early-wake hint: it sees an announced sleep without a fence,
// wakes the reader at the first record of a batch, and leaves nothing owed
// for the rest of the batch; NeedsWake after the batch stays exact.
TEST(Ring, EarlyWakeHintWakesOncePerSleep) {
  RingMapping m;
  ASSERT_EQ(m.Create(kSmall), 0);
  RingWriter w(&m);
  RingReader r(&m);
  EXPECT_FALSE(r.MaybeHasData());
  EXPECT_FALSE(w.ReaderMaybeSleeping());
  ASSERT_TRUE(r.PrepareToSleep());
  EXPECT_TRUE(w.ReaderMaybeSleeping());
  ASSERT_EQ(w.Write(reinterpret_cast<const uint8_t*>("a"), 1), RingStatus::kOk);
  EXPECT_TRUE(r.MaybeHasData());
  // First record: the hint says the reader sleeps, NeedsWake claims the
  // one signal.
  EXPECT_TRUE(w.ReaderMaybeSleeping());
  EXPECT_TRUE(w.NeedsWake());
  // The rest of the batch owes nothing.
  ASSERT_EQ(w.Write(reinterpret_cast<const uint8_t*>("b"), 1), RingStatus::kOk);
  EXPECT_FALSE(w.ReaderMaybeSleeping());
  EXPECT_FALSE(w.NeedsWake());
  r.DoneSleeping();
  const uint8_t* d;
  size_t n;
  for (const char expected : {'a', 'b'}) {
    ASSERT_EQ(r.Peek(&d, &n), RingStatus::kOk);
    EXPECT_EQ(*d, expected);
    r.Consume();
  }
  EXPECT_FALSE(r.MaybeHasData());
}

TEST(SpinWindow, StartsIdleAndFollowsTheGaps) {
  SpinWindow s;
  // Nothing seen yet: sleep at once.
  EXPECT_EQ(s.window_ns(), 0u);
  // Data keeps following within a few microseconds: a window opens, about
  // twice the gap, never more than the maximum nor less than the minimum.
  for (int i = 0; i < 40; i++) s.Arrived(3000);
  EXPECT_GE(s.window_ns(), 5000u);
  EXPECT_LE(s.window_ns(), 7000u);
  for (int i = 0; i < 40; i++) s.Arrived(10);
  EXPECT_EQ(s.window_ns(), SpinWindow::kMinNs);
  for (int i = 0; i < 40; i++) s.Arrived(SpinWindow::kMaxNs / 2);
  EXPECT_LE(s.window_ns(), SpinWindow::kMaxNs);
  // Spins that find nothing close the window within a few misses.
  for (int i = 0; i < 40; i++) s.Arrived(3000);
  int misses = 0;
  while (s.window_ns() > 0 && misses < 100) {
    s.Missed(s.window_ns());
    misses++;
  }
  EXPECT_EQ(s.window_ns(), 0u);
  EXPECT_LE(misses, 8);
  // One long pause (an idle channel) closes it at once; huge gaps cannot
  // overflow the average.
  for (int i = 0; i < 40; i++) s.Arrived(3000);
  s.Arrived(UINT64_MAX);
  EXPECT_EQ(s.window_ns(), 0u);
  EXPECT_LE(s.average_ns(), SpinWindow::kIdleNs);
}

TEST(SpinHitRate, ProbesUntilSpinsCatchDataAndStopsAfterMisses) {
  SpinHitRate r;
  // Nothing caught yet: one read in kProbeEvery spins.
  int spins = 0;
  for (int i = 0; i < 10 * SpinHitRate::kProbeEvery; i++) spins += r.ShouldSpin() ? 1 : 0;
  EXPECT_EQ(spins, 10);
  // Probes that catch data open it: every read spins once half of the
  // recent spins caught something, within a few hits.
  int hits = 0;
  while (r.hits() < SpinHitRate::kToSpin) {
    r.Hit();
    hits++;
    ASSERT_LT(hits, 10);
  }
  EXPECT_LE(hits, 3);
  for (int i = 0; i < 100; i++) EXPECT_TRUE(r.ShouldSpin());
  // The rate stays bounded; misses in a row close it within a few.
  for (int i = 0; i < 100; i++) r.Hit();
  EXPECT_LE(r.hits(), SpinHitRate::kFull);
  int misses = 0;
  while (r.hits() >= SpinHitRate::kToSpin) r.Missed(), misses++;
  EXPECT_LE(misses, 3);
  EXPECT_FALSE(r.ShouldSpin());
  // A stream whose spins always miss costs one spin per kProbeEvery reads.
  spins = 0;
  for (int i = 0; i < 10 * SpinHitRate::kProbeEvery; i++) {
    if (r.ShouldSpin()) {
      spins++;
      r.Missed();
    }
  }
  EXPECT_LE(spins, 11);
  EXPECT_LT(r.hits(), SpinHitRate::kToSpin);
}

// ---- hostile contents ------------------------------------------------------

// Reads everything a (possibly scribbled-over) ring offers, checking that
// every record handed out lies inside the data area. Returns the final
// status: at most a bounded number of records can come out.
RingStatus DrainChecked(RingMapping& m, RingReader& r, size_t* records) {
  const size_t bound = m.capacity() / kRingRecordHeaderSize + 2;
  for (size_t i = 0; i <= bound; i++) {
    const uint8_t* d = nullptr;
    size_t n = 0;
    const RingStatus s = r.Peek(&d, &n);
    if (s != RingStatus::kOk) return s;
    EXPECT_TRUE(InData(m, d, n));
    EXPECT_LE(n, RingMaxRecordPayload(m.capacity()));
    ++*records;
    r.Consume();
  }
  ADD_FAILURE() << "more records than the ring can hold";
  return RingStatus::kError;
}

TEST(RingHostile, ImpossibleHeadIsAnError) {
  struct Case {
    const char* name;
    uint64_t head;
  };
  for (const Case& c : {Case{"misaligned", 12}, Case{"past a full ring", kSmall + 8},
                        Case{"far ahead", uint64_t{1} << 63}, Case{"huge", ~uint64_t{0} - 7}}) {
    RingMapping m;
    ASSERT_EQ(m.Create(kSmall), 0);
    RingReader r(&m);
    m.header()->head.store(c.head);
    const uint8_t* d;
    size_t n;
    EXPECT_EQ(r.Peek(&d, &n), RingStatus::kError) << c.name;
    EXPECT_EQ(r.error(), RingError::kBadIndex) << c.name;
    // Sticky, and sleeping is refused so the caller sees the error.
    EXPECT_EQ(r.Peek(&d, &n), RingStatus::kError) << c.name;
    EXPECT_FALSE(r.PrepareToSleep()) << c.name;
  }
  // A head that moves backwards.
  RingMapping m;
  ASSERT_EQ(m.Create(kSmall), 0);
  RingWriter w(&m);
  RingReader r(&m);
  ASSERT_EQ(w.Write(reinterpret_cast<const uint8_t*>("abc"), 3), RingStatus::kOk);
  ASSERT_EQ(w.Write(reinterpret_cast<const uint8_t*>("abc"), 3), RingStatus::kOk);
  const uint8_t* d;
  size_t n;
  ASSERT_EQ(r.Peek(&d, &n), RingStatus::kOk);
  r.Consume();
  m.header()->head.store(8);
  ASSERT_EQ(r.Peek(&d, &n), RingStatus::kOk);  // cached: still the second record
  r.Consume();
  EXPECT_EQ(r.Peek(&d, &n), RingStatus::kError);
  EXPECT_EQ(r.error(), RingError::kBadIndex);
}

TEST(RingHostile, ImpossibleRecordIsAnError) {
  struct Case {
    const char* name;
    uint32_t length;
    uint32_t kind;
    size_t at;  // where the record starts (the ring's ends are moved there)
  };
  const uint32_t data = static_cast<uint32_t>(RingRecordKind::kData);
  const uint32_t wrap = static_cast<uint32_t>(RingRecordKind::kWrap);
  const Case cases[] = {
      {"unknown kind", 8, 0x1234, 0},
      {"length past head", 64, data, 0},
      {"length past the end", 1000, data, kSmall - 64},
      {"length above the maximum", 0xffffffffu, data, 0},
      {"wrap at the start", kSmall - 8, wrap, 0},
      {"wrap of the wrong length", 8, wrap, kSmall - 64},
      {"wrap longer than published", 56, wrap, kSmall - 64},
  };
  for (const Case& c : cases) {
    RingMapping m;
    ASSERT_EQ(m.Create(kSmall), 0);
    // Both ends start at c.at; 32 bytes are published.
    m.header()->head.store(c.at);
    m.header()->tail.store(c.at);
    RingReader r(&m);
    ASSERT_EQ(r.error(), RingError::kNone);
    uint8_t* rec = m.data() + c.at;
    std::memcpy(rec, &c.length, 4);
    std::memcpy(rec + 4, &c.kind, 4);
    m.header()->head.store(c.at + 32);
    const uint8_t* d;
    size_t n;
    EXPECT_EQ(r.Peek(&d, &n), RingStatus::kError) << c.name;
    EXPECT_EQ(r.error(), RingError::kBadRecord) << c.name;
  }
}

TEST(RingHostile, ImpossibleTailIsAnErrorForTheWriter) {
  // Misaligned, past what was published, and far past it. (An aligned tail
  // that is merely not on a record boundary is the reader's own business:
  // it can only cost the writer space, never an out-of-range access.)
  for (uint64_t tail : {uint64_t{4}, uint64_t{1004}, uint64_t{kSmall + 8}, uint64_t{1} << 40}) {
    RingMapping m;
    ASSERT_EQ(m.Create(kSmall), 0);
    RingWriter w(&m);
    const uint8_t msg[1000] = {};
    // Fill the ring so the writer has to read tail.
    while (w.Write(msg, sizeof(msg)) == RingStatus::kOk) {
    }
    ASSERT_EQ(w.error(), RingError::kNone);
    m.header()->tail.store(tail);
    EXPECT_EQ(w.Write(msg, sizeof(msg)), RingStatus::kError) << tail;
    EXPECT_EQ(w.error(), RingError::kBadIndex);
    EXPECT_FALSE(w.PrepareToSleep(sizeof(msg)));
  }
  // A header scribbled before the writer attached.
  RingMapping m;
  ASSERT_EQ(m.Create(kSmall), 0);
  m.header()->tail.store(64);
  RingWriter w(&m);
  EXPECT_EQ(w.error(), RingError::kBadIndex);
  EXPECT_EQ(w.Write(reinterpret_cast<const uint8_t*>("x"), 1), RingStatus::kError);
}

TEST(RingHostile, RandomScribblesNeverEscapeTheRing) {
  std::mt19937_64 rng(1515);
  size_t errors = 0;
  size_t records = 0;
  for (int round = 0; round < 3000; round++) {
    RingMapping m;
    ASSERT_EQ(m.Create(kSmall), 0);
    RingWriter w(&m);
    RingReader r(&m);
    // Some honest traffic first, so the ends are anywhere.
    const int honest = static_cast<int>(rng() % 40);
    for (int i = 0; i < honest; i++) {
      std::vector<uint8_t> msg(rng() % 300, 0x5a);
      if (w.Write(msg.data(), msg.size()) != RingStatus::kOk) {
        const uint8_t* d;
        size_t n;
        if (r.Peek(&d, &n) == RingStatus::kOk) r.Consume();
      }
    }
    // Then the peer scribbles: over record headers, lengths and indices,
    // choosing values near the interesting edges as well as at random.
    const int scribbles = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < scribbles; i++) {
      const uint64_t edges[] = {0, 4, 8, kSmall - 8, kSmall, kSmall + 8, ~uint64_t{0}, rng()};
      const uint64_t v = rng() % 2 ? edges[rng() % 8] : rng() % (kSmall * 2);
      switch (rng() % 4) {
        case 0:
          m.header()->head.store(rng() % 2 ? v : r.tail() + (v & ~uint64_t{7}) % (kSmall + 16));
          break;
        case 1: {
          const size_t at = (rng() % (kSmall / 8)) * 8;
          const uint32_t len = static_cast<uint32_t>(v);
          std::memcpy(m.data() + at, &len, 4);
          break;
        }
        case 2: {
          const size_t at = (rng() % (kSmall / 8)) * 8 + 4;
          const uint32_t kinds[] = {static_cast<uint32_t>(RingRecordKind::kData),
                                    static_cast<uint32_t>(RingRecordKind::kWrap), static_cast<uint32_t>(v)};
          std::memcpy(m.data() + at, &kinds[rng() % 3], 4);
          break;
        }
        default:
          m.data()[rng() % kSmall] = static_cast<uint8_t>(v);
          break;
      }
    }
    const RingStatus s = DrainChecked(m, r, &records);
    if (s == RingStatus::kError) errors++;
    // The writer, looking at a tail the reader may have moved honestly or
    // that was scribbled, never hands out space outside the ring either.
    m.header()->tail.store(rng() % 2 ? rng() : r.tail());
    uint8_t* out = nullptr;
    const size_t size = rng() % (kSmall / 2);
    if (w.Reserve(size, &out) == RingStatus::kOk) {
      ASSERT_TRUE(InData(m, out, size));
      std::memset(out, 0, size);
      w.Commit(size);
    }
  }
  // The scribbles must actually have been detected most of the time.
  EXPECT_GT(errors, 1000u);
  EXPECT_GT(records, 1000u);
}

// ---- two processes ---------------------------------------------------------

// How a side sleeps and is woken: a futex on the ring's own sleep word, or
// a wake-up link per direction (as an event loop would poll).
struct Waker {
  bool futex = true;
  Link efd;
  std::atomic<uint32_t>* word = nullptr;
  // False when the wait timed out: a lost wake-up.
  bool Wait() {
    if (futex) {
      const uint64_t start = NowMs();
      while (word->load() == 1) {
        const int r = FutexWait(word, 1, kWaitMs);
        if (r == -ETIMEDOUT || NowMs() - start > static_cast<uint64_t>(kWaitMs)) return false;
      }
      return true;
    }
    if (LinkWait(efd, kWaitMs) != 1) return false;
    LinkDrain(efd);
    return true;
  }
  void Signal() {
    if (futex) {
      FutexWake(word);
    } else {
      LinkSignal(efd);
    }
  }
};

struct SideStats {
  uint64_t sleeps = 0;
  uint64_t wakes_sent = 0;
};

// Writes one record, spinning within the adaptive budget (none when spin is
// null) and then sleeping while the ring is full. False on a ring error or a
// lost wake-up.
bool SendRecord(RingWriter& w, const uint8_t* data, size_t size, SpinBudget* spin, Waker& space,
                Waker& reader, SideStats* st) {
  for (;;) {
    const RingStatus s = w.Write(data, size);
    if (s == RingStatus::kOk) {
      if (w.NeedsWake()) {
        reader.Signal();
        st->wakes_sent++;
      }
      return true;
    }
    if (s == RingStatus::kError) return false;
    bool ok = false;
    const uint32_t spins = spin != nullptr ? spin->budget() : 0;
    for (uint32_t i = 0; i < spins && !ok; i++) {
      SpinBudget::Pause();
      ok = w.Write(data, size) == RingStatus::kOk;
    }
    if (spin != nullptr) {
      if (ok) {
        spin->Succeeded();
      } else {
        spin->Failed();
      }
    }
    if (ok) {
      if (w.NeedsWake()) {
        reader.Signal();
        st->wakes_sent++;
      }
      return true;
    }
    if (w.PrepareToSleep(size)) {
      st->sleeps++;
      if (!space.Wait()) return false;
      w.DoneSleeping();
    }
  }
}

// Takes one record, spinning and then sleeping while the ring is empty, and
// hands it to check(data, size) before consuming it.
template <typename Check>
bool ReceiveRecord(RingReader& r, SpinBudget* spin, Waker& data_ready, Waker& writer, SideStats* st,
                   Check&& check) {
  for (;;) {
    const uint8_t* d;
    size_t n;
    RingStatus s = r.Peek(&d, &n);
    if (s == RingStatus::kNeedMore && spin != nullptr) {
      for (uint32_t i = 0; s == RingStatus::kNeedMore && i < spin->budget(); i++) {
        SpinBudget::Pause();
        s = r.Peek(&d, &n);
      }
      if (s == RingStatus::kNeedMore) {
        spin->Failed();
      } else {
        spin->Succeeded();
      }
    }
    if (s == RingStatus::kOk) {
      const bool good = check(d, n);
      r.Consume();
      if (r.NeedsWake()) {
        writer.Signal();
        st->wakes_sent++;
      }
      return good;
    }
    if (s == RingStatus::kError) return false;
    if (r.PrepareToSleep()) {
      st->sleeps++;
      if (!data_ready.Wait()) return false;
      r.DoneSleeping();
    }
  }
}

// Waits for a child, killing it if it outlives the deadline. Returns its
// exit code, or -1 when it had to be killed or died of a signal.
int ReapChild(pid_t pid, int timeout_ms) {
  const uint64_t start = NowMs();
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (r < 0) return -1;
    if (NowMs() - start > static_cast<uint64_t>(timeout_ms)) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    usleep(2000);
  }
}

struct Channel {
  RingMapping down;  // parent -> child
  RingMapping up;    // child -> parent
  Link efd_down;     // wakes the child (data down, or space up)
  Link efd_up;       // wakes the parent
  ~Channel() {
    efd_down.Close();
    efd_up.Close();
  }
};

// Ping-pong: the parent sends a frame, the child echoes it through the
// other ring, the parent checks it and sends the next. With no spinning
// both sides go to sleep for nearly every message, so each round trip is
// two sleeps and two wake-ups; a single lost one fails the test by timeout.
void PingPong(bool futex, uint64_t round_trips, bool spinning) {
  Channel ch;
  ASSERT_EQ(ch.down.Create(kSmall), 0);
  ASSERT_EQ(ch.up.Create(kSmall), 0);
  ch.efd_down = MakeLink();
  ch.efd_up = MakeLink();
  ASSERT_GE(ch.efd_down.wait, 0);
  ASSERT_GE(ch.efd_up.wait, 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child maps the rings afresh from their descriptors, as a peer
    // that received them over the socket would.
    RingMapping down, up;
    if (down.Attach(ch.down.fd()) != 0 || up.Attach(ch.up.fd()) != 0) _exit(10);
    RingReader in(&down);
    RingWriter out(&up);
    // The child sleeps on data down and on space up: both signalled through
    // efd_down (or the words in the rings it sleeps on).
    Waker data{futex, ch.efd_down, &down.header()->consumer_sleeping};
    Waker space{futex, ch.efd_down, &up.header()->producer_sleeping};
    Waker parent_data{futex, ch.efd_up, &up.header()->consumer_sleeping};
    Waker parent_space{futex, ch.efd_up, &down.header()->producer_sleeping};
    SideStats st;
    SpinBudget spin_state;
    SpinBudget* spins = spinning ? &spin_state : nullptr;
    std::vector<uint8_t> copy;
    for (uint64_t i = 0; i < round_trips; i++) {
      bool ok = ReceiveRecord(in, spins, data, parent_space, &st, [&](const uint8_t* d, size_t n) {
        // Copy out before use, as a reader of shared memory must.
        copy.assign(d, d + n);
        return true;
      });
      if (!ok) _exit(11);
      if (!SendRecord(out, copy.data(), copy.size(), spins, space, parent_data, &st)) _exit(12);
    }
    _exit(st.sleeps > 0 || spinning ? 0 : 13);
  }
  RingWriter out(&ch.down);
  RingReader in(&ch.up);
  Waker data{futex, ch.efd_up, &ch.up.header()->consumer_sleeping};
  Waker space{futex, ch.efd_up, &ch.down.header()->producer_sleeping};
  Waker child_data{futex, ch.efd_down, &ch.down.header()->consumer_sleeping};
  Waker child_space{futex, ch.efd_down, &ch.up.header()->producer_sleeping};
  SideStats st;
  SpinBudget spin_state;
  SpinBudget* spins = spinning ? &spin_state : nullptr;
  uint64_t next_seq = 0;
  bool ok = true;
  const uint64_t start = NowMs();
  for (uint64_t i = 0; i < round_trips && ok; i++) {
    const std::vector<uint8_t> f = MakeFrame(i, 8 + i % 120);
    ok = SendRecord(out, f.data(), f.size(), spins, space, child_data, &st) &&
         ReceiveRecord(in, spins, data, child_space, &st,
                       [&](const uint8_t* d, size_t n) { return CheckFrames(d, n, &next_seq); });
  }
  const uint64_t elapsed = NowMs() - start;
  const int code = ReapChild(pid, kWaitMs * 2);
  EXPECT_TRUE(ok) << "parent failed after " << next_seq << " round trips";
  EXPECT_EQ(code, 0);
  EXPECT_EQ(next_seq, round_trips);
  // On a busy machine the peer often answers between the announcement and
  // the re-check, so not every round trip sleeps; many must.
  if (!spinning) {
    EXPECT_GT(st.sleeps, round_trips / 100);
  }
  std::printf("[ ring ] %s ping-pong: %llu round trips in %llu ms, parent slept %llu times\n",
              futex ? "futex" : "wake-link", static_cast<unsigned long long>(round_trips),
              static_cast<unsigned long long>(elapsed), static_cast<unsigned long long>(st.sleeps));
}

TEST(RingProcesses, PingPongFutexBothSidesSleeping) { PingPong(true, 200000 * StressScale(), false); }

TEST(RingProcesses, PingPongWakeLinkBothSidesSleeping) { PingPong(false, 200000 * StressScale(), false); }

TEST(RingProcesses, PingPongWithSpinBudgetning) { PingPong(true, 100000 * StressScale(), true); }

// Batches both ways, as a channel writes them: a writer wakes a sleeping
// reader at the first record of a batch (the fence-free hint), writes the
// rest, and checks NeedsWake once after the batch; the reader sleeps
// whenever its ring is empty. With wake-up links and no spinning, both
// sides sleep and wake for nearly every batch; a single lost wake-up fails
// by timeout. PROCWIRE_RING_STRESS=10 makes it millions of sleeps.
bool SendBatchWithEarlyWake(RingWriter& w, uint64_t first_seq, uint64_t count, Waker& reader, SideStats* st) {
  for (uint64_t k = 0; k < count; k++) {
    const std::vector<uint8_t> f = MakeFrame(first_seq + k, 8 + (first_seq + k) % 100);
    if (w.Write(f.data(), f.size()) != RingStatus::kOk) return false;
    if (w.ReaderMaybeSleeping() && w.NeedsWake()) {
      reader.Signal();
      st->wakes_sent++;
    }
  }
  if (w.NeedsWake()) {
    reader.Signal();
    st->wakes_sent++;
  }
  return true;
}

TEST(RingProcesses, BatchedPingPongWithEarlyWakeBothSidesSleeping) {
  const uint64_t batches = 50000 * StressScale();
  auto batch_size = [](uint64_t b) { return 1 + b % 8; };
  Channel ch;
  ASSERT_EQ(ch.down.Create(kSmall * 4), 0);
  ASSERT_EQ(ch.up.Create(kSmall * 4), 0);
  ch.efd_down = MakeLink();
  ch.efd_up = MakeLink();
  ASSERT_GE(ch.efd_down.wait, 0);
  ASSERT_GE(ch.efd_up.wait, 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    RingMapping down, up;
    if (down.Attach(ch.down.fd()) != 0 || up.Attach(ch.up.fd()) != 0) _exit(10);
    RingReader in(&down);
    RingWriter out(&up);
    Waker data{false, ch.efd_down, &down.header()->consumer_sleeping};
    Waker parent_data{false, ch.efd_up, &up.header()->consumer_sleeping};
    Waker unused{false, ch.efd_up, &down.header()->producer_sleeping};
    SideStats st;
    uint64_t seq = 0;
    for (uint64_t b = 0; b < batches; b++) {
      const uint64_t first = seq;
      for (uint64_t k = 0; k < batch_size(b); k++) {
        if (!ReceiveRecord(in, nullptr, data, unused, &st,
                           [&](const uint8_t* d, size_t n) { return CheckFrames(d, n, &seq); })) {
          _exit(11);
        }
      }
      if (!SendBatchWithEarlyWake(out, first, batch_size(b), parent_data, &st)) _exit(12);
    }
    _exit(st.sleeps > 0 ? 0 : 13);
  }
  RingWriter out(&ch.down);
  RingReader in(&ch.up);
  Waker data{false, ch.efd_up, &ch.up.header()->consumer_sleeping};
  Waker child_data{false, ch.efd_down, &ch.down.header()->consumer_sleeping};
  Waker unused{false, ch.efd_down, &ch.up.header()->producer_sleeping};
  SideStats st;
  uint64_t sent = 0;
  uint64_t next_seq = 0;
  bool ok = true;
  const uint64_t start = NowMs();
  for (uint64_t b = 0; b < batches && ok; b++) {
    ok = SendBatchWithEarlyWake(out, sent, batch_size(b), child_data, &st);
    sent += batch_size(b);
    for (uint64_t k = 0; k < batch_size(b) && ok; k++) {
      ok = ReceiveRecord(in, nullptr, data, unused, &st,
                         [&](const uint8_t* d, size_t n) { return CheckFrames(d, n, &next_seq); });
    }
  }
  const uint64_t elapsed = NowMs() - start;
  const int code = ReapChild(pid, kWaitMs * 2);
  EXPECT_TRUE(ok) << "parent failed after " << next_seq << " frames";
  EXPECT_EQ(code, 0);
  EXPECT_EQ(next_seq, sent);
  EXPECT_GT(st.sleeps, batches / 100);
  std::printf(
      "[ ring ] batched ping-pong with early wake: %llu batches in %llu ms, parent slept %llu times\n",
      static_cast<unsigned long long>(batches), static_cast<unsigned long long>(elapsed),
      static_cast<unsigned long long>(st.sleeps));
}

// The same protocol between two threads of one process, so a thread
// sanitizer build can check the memory ordering (it cannot see across
// processes): a writer thread streams frames through a small ring while the
// reader thread checks them, both sleeping on futexes.
TEST(RingThreads, StreamWithSleepingOnBothSides) {
  RingMapping ring;
  ASSERT_EQ(ring.Create(kSmall), 0);
  const uint64_t frames = 200000;
  bool writer_ok = true;
  std::thread writer([&] {
    RingWriter out(&ring);
    Waker space{true, Link{}, &ring.header()->producer_sleeping};
    Waker reader{true, Link{}, &ring.header()->consumer_sleeping};
    SideStats st;
    for (uint64_t seq = 0; seq < frames && writer_ok; seq++) {
      const std::vector<uint8_t> f = MakeFrame(seq, 8 + seq % 300);
      writer_ok = SendRecord(out, f.data(), f.size(), nullptr, space, reader, &st);
    }
  });
  RingReader in(&ring);
  Waker data{true, Link{}, &ring.header()->consumer_sleeping};
  Waker writer_waker{true, Link{}, &ring.header()->producer_sleeping};
  SideStats st;
  uint64_t next_seq = 0;
  bool ok = true;
  while (ok && next_seq < frames) {
    ok = ReceiveRecord(in, nullptr, data, writer_waker, &st,
                       [&](const uint8_t* d, size_t n) { return CheckFrames(d, n, &next_seq); });
  }
  writer.join();
  EXPECT_TRUE(ok);
  EXPECT_TRUE(writer_ok);
  EXPECT_EQ(next_seq, frames);
}

// Streaming: the parent pours frames, batched several to a record, into a
// small ring as fast as it can; the child checks every one. The ring is
// full and empty in turn all the time, so both sides sleep and wake on
// both conditions.
void Stream(bool futex, uint64_t frames, bool spinning) {
  Channel ch;
  ASSERT_EQ(ch.down.Create(kSmall), 0);
  ch.efd_down = MakeLink();
  ch.efd_up = MakeLink();
  int result[2];
  ASSERT_EQ(pipe(result), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(result[0]);
    RingMapping down;
    if (down.Attach(ch.down.fd()) != 0) _exit(10);
    RingReader in(&down);
    Waker data{futex, ch.efd_down, &down.header()->consumer_sleeping};
    Waker parent_space{futex, ch.efd_up, &down.header()->producer_sleeping};
    SideStats st;
    SpinBudget spin_state;
    SpinBudget* spins = spinning ? &spin_state : nullptr;
    uint64_t next_seq = 0;
    while (next_seq < frames) {
      if (!ReceiveRecord(in, spins, data, parent_space, &st,
                         [&](const uint8_t* d, size_t n) { return CheckFrames(d, n, &next_seq); })) {
        _exit(11);
      }
    }
    const uint64_t report[2] = {next_seq, st.sleeps};
    if (write(result[1], report, sizeof(report)) != sizeof(report)) _exit(12);
    _exit(0);
  }
  close(result[1]);
  RingWriter out(&ch.down);
  Waker space{futex, ch.efd_up, &ch.down.header()->producer_sleeping};
  Waker child_data{futex, ch.efd_down, &ch.down.header()->consumer_sleeping};
  SideStats st;
  SpinBudget spin_state;
  SpinBudget* spins = spinning ? &spin_state : nullptr;
  bool ok = true;
  std::vector<uint8_t> batch;
  const uint64_t start = NowMs();
  uint64_t seq = 0;
  while (seq < frames && ok) {
    batch.clear();
    const uint64_t in_batch = 1 + seq % 7;
    for (uint64_t k = 0; k < in_batch && seq < frames; k++, seq++) {
      const std::vector<uint8_t> f = MakeFrame(seq, 8 + (seq * 37) % 200);
      batch.insert(batch.end(), f.begin(), f.end());
    }
    ok = SendRecord(out, batch.data(), batch.size(), spins, space, child_data, &st);
  }
  const uint64_t elapsed = NowMs() - start;
  uint64_t report[2] = {0, 0};
  const ssize_t got = read(result[0], report, sizeof(report));
  close(result[0]);
  const int code = ReapChild(pid, kWaitMs * 2);
  EXPECT_TRUE(ok);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(got, static_cast<ssize_t>(sizeof(report)));
  EXPECT_EQ(report[0], frames);
  std::printf("[ ring ] %s stream: %llu frames in %llu ms, writer slept %llu times, reader %llu\n",
              futex ? "futex" : "wake-link", static_cast<unsigned long long>(frames),
              static_cast<unsigned long long>(elapsed), static_cast<unsigned long long>(st.sleeps),
              static_cast<unsigned long long>(report[1]));
}

TEST(RingProcesses, StreamFutexNoSpin) { Stream(true, 500000 * StressScale(), false); }

TEST(RingProcesses, StreamWakeLinkWithSpinBudget) { Stream(false, 500000 * StressScale(), true); }

// CPU time (user + system, in clock ticks) a process has used so far, from
// /proc/<pid>/stat; -1 when unreadable.
long CpuTicks(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return -1;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // Fields after the command name, which is in parentheses and may hold
  // spaces: state is field 3, utime 14, stime 15.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return -1;
  unsigned long utime = 0, stime = 0;
  if (std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2)
    return -1;
  return static_cast<long>(utime + stime);
}

// An idle reader sleeps: after its spin budget runs out it costs no CPU
// until the next record. The child waits on an empty ring for a second;
// clock ticks are 10 ms, so "no measurable CPU" is at most 2 ticks.
TEST(RingProcesses, IdleReaderUsesNoCpu) {
  RingMapping ring;
  ASSERT_EQ(ring.Create(kSmall), 0);
  Link efd = MakeLink();
  ASSERT_GE(efd.wait, 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    RingMapping m;
    if (m.Attach(ring.fd()) != 0) _exit(10);
    RingReader in(&m);
    SpinBudget spin;
    // Two records: one to start (after which the spin budget is warm, the
    // worst case for idling), one to end. The wait between them is long,
    // so the bounded wait is retried rather than treated as lost.
    for (int i = 0; i < 2; i++) {
      for (;;) {
        const uint8_t* d;
        size_t n;
        RingStatus s = in.Peek(&d, &n);
        for (uint32_t k = 0; s == RingStatus::kNeedMore && k < spin.budget(); k++) {
          SpinBudget::Pause();
          s = in.Peek(&d, &n);
        }
        if (s == RingStatus::kOk) {
          spin.Succeeded();
          in.Consume();
          break;
        }
        if (s == RingStatus::kError) _exit(11);
        spin.Failed();
        if (in.PrepareToSleep()) {
          if (LinkWait(efd, 3 * kWaitMs) != 1) _exit(12);
          LinkDrain(efd);
          in.DoneSleeping();
        }
      }
    }
    _exit(0);
  }
  RingWriter out(&ring);
  ASSERT_EQ(out.Write(reinterpret_cast<const uint8_t*>("go"), 2), RingStatus::kOk);
  if (out.NeedsWake()) LinkSignal(efd);
  usleep(200000);  // the child takes the record and goes idle
  const long before = CpuTicks(pid);
  usleep(1000000);
  const long after = CpuTicks(pid);
  ASSERT_EQ(out.Write(reinterpret_cast<const uint8_t*>("end"), 3), RingStatus::kOk);
  // The child is asleep, so this write must owe it a wake-up.
  EXPECT_TRUE(out.NeedsWake());
  LinkSignal(efd);
  EXPECT_EQ(ReapChild(pid, kWaitMs), 0);
  efd.Close();
  ASSERT_GE(before, 0);
  ASSERT_GE(after, 0);
  EXPECT_LE(after - before, 2) << "an idle reader used CPU";
}

// A writer killed in the middle of a record never delivers part of it: the
// record is only published by Commit. The child writes whole records, then
// reserves one more, fills half of it, tells the parent and waits to die.
TEST(RingProcesses, WriterKilledMidRecordDeliversNoHalfFrame) {
  RingMapping ring;
  ASSERT_EQ(ring.Create(kSmall), 0);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(ready[0]);
    RingMapping m;
    if (m.Attach(ring.fd()) != 0) _exit(10);
    RingWriter w(&m);
    for (uint64_t seq = 0; seq < 10; seq++) {
      const std::vector<uint8_t> f = MakeFrame(seq, 100);
      if (w.Write(f.data(), f.size()) != RingStatus::kOk) _exit(11);
    }
    const std::vector<uint8_t> f = MakeFrame(10, 1000);
    uint8_t* out = nullptr;
    if (w.Reserve(f.size(), &out) != RingStatus::kOk) _exit(12);
    std::memcpy(out, f.data(), f.size() / 2);
    if (write(ready[1], "x", 1) != 1) _exit(13);
    for (;;) pause();
  }
  close(ready[1]);
  char c;
  pollfd p{ready[0], POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, kWaitMs), 1);
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  RingReader r(&ring);
  uint64_t next_seq = 0;
  const uint8_t* d;
  size_t n;
  while (r.Peek(&d, &n) == RingStatus::kOk) {
    EXPECT_TRUE(CheckFrames(d, n, &next_seq));
    r.Consume();
  }
  EXPECT_EQ(r.error(), RingError::kNone);
  EXPECT_EQ(next_seq, 10u);
}

// The same, at random moments: a writer filling records slowly is killed
// while running; whatever was published is whole and in order.
TEST(RingProcesses, WriterKilledAtRandomDeliversWholeFramesOnly) {
  std::mt19937 rng(42);
  for (int round = 0; round < 20; round++) {
    RingMapping ring;
    ASSERT_EQ(ring.Create(1 << 16), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      RingMapping m;
      if (m.Attach(ring.fd()) != 0) _exit(10);
      RingWriter w(&m);
      for (uint64_t seq = 0;; seq++) {
        const std::vector<uint8_t> f = MakeFrame(seq, 8 + seq % 500);
        uint8_t* out = nullptr;
        const RingStatus s = w.Reserve(f.size(), &out);
        if (s == RingStatus::kError) _exit(11);
        if (s == RingStatus::kNeedMore) {
          // Full: nobody reads until we are dead; wait for the signal.
          for (;;) pause();
        }
        // Byte by byte, so the kill often lands inside a record.
        for (size_t i = 0; i < f.size(); i++) {
          __atomic_store_n(out + i, f[i], __ATOMIC_RELAXED);
          if (i % 64 == 0) sched_yield();
        }
        w.Commit(f.size());
      }
    }
    usleep(1000 + rng() % 20000);
    kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(status));
    RingReader r(&ring);
    uint64_t next_seq = 0;
    const uint8_t* d;
    size_t n;
    while (r.Peek(&d, &n) == RingStatus::kOk) {
      ASSERT_TRUE(CheckFrames(d, n, &next_seq)) << "round " << round << " frame " << next_seq;
      r.Consume();
    }
    EXPECT_EQ(r.error(), RingError::kNone);
  }
}

}  // namespace
}  // namespace procwire
