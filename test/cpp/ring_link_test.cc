// RingLink (src/core/ring_link.h): both ends of a channel's rings in one
// process, set up the way two procwire ends exchange their set-up frames.
#include "ring_link.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace procwire {
namespace {

bool Readable(int fd) {
  struct pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

// Both ends send their set-up, as two procwire ends do: each carries the
// ring its sender writes and the signalling end of the link its sender
// reads on.
void Connect(RingLink* a, RingLink* b) {
  int a_ring = -1;
  int a_wake = -1;
  int b_ring = -1;
  int b_wake = -1;
  ASSERT_EQ(a->CreateOutbound(kChannelRingCapacity), 0);
  ASSERT_EQ(b->CreateOutbound(kChannelRingCapacity), 0);
  ASSERT_EQ(a->DupSetupFds(&a_ring, &a_wake), 0);
  ASSERT_EQ(b->DupSetupFds(&b_ring, &b_wake), 0);
  ASSERT_EQ(b->AttachInbound(a_ring), 0);
  ASSERT_EQ(a->AttachInbound(b_ring), 0);
  close(a_ring);
  close(b_ring);
  ASSERT_EQ(b->TakePeerWake(a_wake), 0);
  ASSERT_EQ(a->TakePeerWake(b_wake), 0);
}

std::string ReadOne(RingLink* link, uint64_t delivered, RingLink::ReadStatus* status) {
  const uint8_t* frames = nullptr;
  size_t size = 0;
  *status = link->Read(delivered, &frames, &size);
  if (*status != RingLink::ReadStatus::kRecord) return std::string();
  return std::string(reinterpret_cast<const char*>(frames), size);
}

TEST(RingLink, RecordsWaitForTheSocketBytesBeforeTheirMark) {
  RingLink a;
  RingLink b;
  Connect(&a, &b);
  ASSERT_TRUE(a.Write(0, reinterpret_cast<const uint8_t*>("one"), 3));
  ASSERT_TRUE(a.Write(100, reinterpret_cast<const uint8_t*>("two"), 3));
  RingLink::ReadStatus st;
  EXPECT_EQ(ReadOne(&b, 0, &st), "one");
  EXPECT_EQ(ReadOne(&b, 99, &st), "");
  EXPECT_EQ(st, RingLink::ReadStatus::kWaiting);
  EXPECT_EQ(ReadOne(&b, 100, &st), "two");
  ReadOne(&b, 100, &st);
  EXPECT_EQ(st, RingLink::ReadStatus::kEmpty);
  EXPECT_EQ(a.messages_out, 2);
}

TEST(RingLink, ASleepingReaderIsWokenOnceThroughItsOwnLink) {
  RingLink a;
  RingLink b;
  Connect(&a, &b);
  RingLink::ReadStatus st;
  ReadOne(&b, 0, &st);
  ASSERT_EQ(st, RingLink::ReadStatus::kEmpty);
  ASSERT_TRUE(b.PrepareToSleep());
  ASSERT_TRUE(a.Write(0, reinterpret_cast<const uint8_t*>("x"), 1));
  a.WakeReaderIfNeeded();
  EXPECT_TRUE(Readable(b.inbound_wake_fd()));
  EXPECT_TRUE(b.DrainWake());
  EXPECT_FALSE(Readable(b.inbound_wake_fd()));
  b.DoneSleeping();
  EXPECT_EQ(ReadOne(&b, 0, &st), "x");
  EXPECT_EQ(a.wakes_sent, 1);
}

// Until the peer's set-up brings the link, the writer leaves the ring alone
// (its frames go by the socket): a record then could not wake the reader.
TEST(RingLink, NoRecordIsWrittenBeforeTheReadersLinkArrives) {
  RingLink a;
  RingLink b;
  int ring_fd = -1;
  int wake_fd = -1;
  ASSERT_EQ(a.CreateOutbound(kChannelRingCapacity), 0);
  ASSERT_EQ(a.DupSetupFds(&ring_fd, &wake_fd), 0);
  ASSERT_EQ(b.AttachInbound(ring_fd), 0);
  close(ring_fd);
  // b's link, which b hands to a in its own set-up.
  int b_ring = -1;
  int b_wake = -1;
  ASSERT_EQ(b.CreateOutbound(kChannelRingCapacity), 0);
  ASSERT_EQ(b.DupSetupFds(&b_ring, &b_wake), 0);
  close(b_ring);
  ASSERT_TRUE(b.PrepareToSleep());
  // Without b's link a record could not wake b: the frame goes by the socket.
  EXPECT_FALSE(a.Write(0, reinterpret_cast<const uint8_t*>("early"), 5));
  a.WakeReaderIfNeeded();
  EXPECT_FALSE(Readable(b.inbound_wake_fd()));
  ASSERT_EQ(a.TakePeerWake(b_wake), 0);
  ASSERT_TRUE(a.Write(0, reinterpret_cast<const uint8_t*>("late"), 4));
  a.WakeReaderIfNeeded();
  EXPECT_TRUE(Readable(b.inbound_wake_fd()));
  close(wake_fd);
}

TEST(RingLink, OnlyAUnixStreamSocketIsTakenAsThePeersLink) {
  RingLink a;
  const int efd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
  ASSERT_GE(efd, 0);
  EXPECT_EQ(a.TakePeerWake(efd), -EPROTO);
  // TakePeerWake closed it.
  EXPECT_EQ(close(efd), -1);
}

TEST(RingLink, AWrongSizedRingIsRefused) {
  RingLink a;
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  EXPECT_EQ(a.AttachInbound(fds[0]), -EPROTO);
  close(fds[0]);
  close(fds[1]);
}

// A link signalled again and again with no record behind it: the peer (or a
// third process it passed its end to) keeps the reader's poll firing.
TEST(RingLink, ALinkSignalledWithoutRecordsCountsAsCorrupt) {
  RingLink a;
  int ring_fd = -1;
  int peer_end = -1;
  ASSERT_EQ(a.CreateOutbound(kChannelRingCapacity), 0);
  ASSERT_EQ(a.DupSetupFds(&ring_fd, &peer_end), 0);
  close(ring_fd);
  bool ok = true;
  uint32_t wakes = 0;
  while (ok && wakes <= kMaxIdleWakes + 1) {
    ASSERT_EQ(WakeLinkSignal(peer_end), 0);
    ok = a.DrainWake();
    wakes++;
  }
  EXPECT_FALSE(ok);
  EXPECT_EQ(wakes, kMaxIdleWakes + 1);
  EXPECT_NE(a.corrupt_reason(), nullptr);
  close(peer_end);
}

TEST(RingLink, OwnWakeUpsAndRecordsResetTheIdleCount) {
  RingLink a;
  RingLink b;
  Connect(&a, &b);
  for (uint32_t i = 0; i < 3 * kMaxIdleWakes; i++) {
    b.WakeSelf();
    ASSERT_TRUE(b.DrainWake()) << i;
  }
  RingLink::ReadStatus st;
  for (uint32_t i = 0; i < 3 * kMaxIdleWakes; i++) {
    ASSERT_TRUE(a.Write(0, reinterpret_cast<const uint8_t*>("r"), 1));
    ASSERT_TRUE(b.DrainWake()) << i;
    ASSERT_EQ(ReadOne(&b, 0, &st), "r");
  }
}

TEST(RingLink, AShutDownLinkCountsAsCorrupt) {
  RingLink a;
  RingLink b;
  int ring_fd = -1;
  int wake_fd = -1;
  ASSERT_EQ(a.CreateOutbound(kChannelRingCapacity), 0);
  ASSERT_EQ(a.DupSetupFds(&ring_fd, &wake_fd), 0);
  close(ring_fd);
  ASSERT_EQ(shutdown(wake_fd, SHUT_WR), 0);
  EXPECT_FALSE(a.DrainWake());
  EXPECT_NE(a.corrupt_reason(), nullptr);
  close(wake_fd);
}

}  // namespace
}  // namespace procwire
