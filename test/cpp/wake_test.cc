// Wake-up links (src/core/wake.h): what the reader of a ring polls, made by
// the reader itself.
#include "wake.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

namespace procwire {
namespace {

bool Readable(int fd) {
  struct pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

TEST(Wake, SignalThenDrainLeavesTheLinkQuiet) {
  int waiter = -1;
  int signaller = -1;
  ASSERT_EQ(WakeLinkCreate(&waiter, &signaller), 0);
  EXPECT_FALSE(Readable(waiter));
  EXPECT_EQ(WakeLinkDrain(waiter, 4), WakeDrain::kDrained);
  ASSERT_EQ(WakeLinkSignal(signaller), 0);
  ASSERT_EQ(WakeLinkSignal(signaller), 0);
  EXPECT_TRUE(Readable(waiter));
  EXPECT_EQ(WakeLinkDrain(waiter, 4), WakeDrain::kDrained);
  EXPECT_FALSE(Readable(waiter));
  EXPECT_NE(fcntl(waiter, F_GETFD) & FD_CLOEXEC, 0);
  close(waiter);
  close(signaller);
}

// The signalling end is what a peer gets: even with O_NONBLOCK cleared on
// it (the peer shares that description), a full link never blocks a signal.
TEST(Wake, AFullLinkNeverBlocksTheSignaller) {
  int waiter = -1;
  int signaller = -1;
  ASSERT_EQ(WakeLinkCreate(&waiter, &signaller), 0);
  ASSERT_EQ(fcntl(signaller, F_SETFL, fcntl(signaller, F_GETFL) & ~O_NONBLOCK), 0);
  for (int i = 0; i < 1 << 16; i++) ASSERT_EQ(WakeLinkSignal(signaller), 0);
  close(waiter);
  close(signaller);
}

// A peer may write more than wake-up bytes: one drain reads a bounded
// amount and says so; the rest stays for the next wake-up.
TEST(Wake, AFloodIsReportedOnceTheBoundIsSpent) {
  int waiter = -1;
  int signaller = -1;
  ASSERT_EQ(WakeLinkCreate(&waiter, &signaller), 0);
  const std::vector<uint8_t> block(4096, 1);
  ASSERT_EQ(send(signaller, block.data(), block.size(), 0), static_cast<ssize_t>(block.size()));
  EXPECT_EQ(WakeLinkDrain(waiter, 2), WakeDrain::kFlooded);
  EXPECT_TRUE(Readable(waiter));
  int drains = 1;
  while (WakeLinkDrain(waiter, 2) == WakeDrain::kFlooded) drains++;
  EXPECT_EQ(drains, 8);
  EXPECT_FALSE(Readable(waiter));
  close(waiter);
  close(signaller);
}

// O_NONBLOCK cleared on the waiting end does not make a drain block either.
TEST(Wake, DrainIsNonBlockingWhateverTheFlags) {
  int waiter = -1;
  int signaller = -1;
  ASSERT_EQ(WakeLinkCreate(&waiter, &signaller), 0);
  ASSERT_EQ(fcntl(waiter, F_SETFL, fcntl(waiter, F_GETFL) & ~O_NONBLOCK), 0);
  EXPECT_EQ(WakeLinkDrain(waiter, 4), WakeDrain::kDrained);
  close(waiter);
  close(signaller);
}

TEST(Wake, AShutDownLinkIsReportedClosed) {
  int waiter = -1;
  int signaller = -1;
  ASSERT_EQ(WakeLinkCreate(&waiter, &signaller), 0);
  ASSERT_EQ(WakeLinkSignal(signaller), 0);
  ASSERT_EQ(shutdown(signaller, SHUT_WR), 0);
  // The byte first; the end of the stream at the next wake-up (a shut-down
  // link stays readable).
  EXPECT_EQ(WakeLinkDrain(waiter, 4), WakeDrain::kDrained);
  EXPECT_TRUE(Readable(waiter));
  EXPECT_EQ(WakeLinkDrain(waiter, 4), WakeDrain::kClosed);
  EXPECT_EQ(WakeLinkSignal(signaller), -EPIPE);
  close(waiter);
  close(signaller);
}

TEST(Wake, OnlyAUnixStreamSocketIsALinkEnd) {
  int waiter = -1;
  int signaller = -1;
  ASSERT_EQ(WakeLinkCreate(&waiter, &signaller), 0);
  EXPECT_TRUE(IsWakeLinkEnd(signaller));
  const int efd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
  ASSERT_GE(efd, 0);
  EXPECT_FALSE(IsWakeLinkEnd(efd));
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  EXPECT_FALSE(IsWakeLinkEnd(pipefd[1]));
  int dgram[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_DGRAM, 0, dgram), 0);
  EXPECT_FALSE(IsWakeLinkEnd(dgram[0]));
  const int inet = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(inet, 0);
  EXPECT_FALSE(IsWakeLinkEnd(inet));
  EXPECT_FALSE(IsWakeLinkEnd(-1));
  for (int fd : std::vector<int>{waiter, signaller, efd, pipefd[0], pipefd[1], dgram[0], dgram[1], inet})
    close(fd);
}

}  // namespace
}  // namespace procwire
