// Tests for WriteQueue over a real non-blocking socket pair: ordering,
// gathering, partial writes against a full socket, release callbacks,
// descriptor passing and errors.
#include "write_queue.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "socket_io.h"

namespace procwire {
namespace {

// Owns a socket pair; both ends non-blocking so no test can hang on a read.
class SocketPair {
 public:
  SocketPair() {
    int fds[2];
    const int r = MakeSocketPair(fds);
    EXPECT_EQ(r, 0);
    writer_ = fds[0];
    reader_ = fds[1];
    EXPECT_EQ(SetNonBlocking(reader_, true), 0);
  }
  ~SocketPair() {
    CloseFd(writer_);
    CloseFd(reader_);
  }
  int writer() const { return writer_; }
  int reader() const { return reader_; }
  void CloseReader() {
    CloseFd(reader_);
    reader_ = -1;
  }

  // Reads whatever is available now (up to `limit` bytes) into *out.
  size_t Drain(std::string* out, size_t limit = SIZE_MAX) {
    size_t total = 0;
    uint8_t buf[65536];
    while (total < limit) {
      const size_t want = std::min(sizeof(buf), limit - total);
      ReadOutcome r = ReceiveWithFds(reader_, buf, want, nullptr);
      if (r.bytes <= 0) {
        EXPECT_TRUE(r.bytes == -EAGAIN || r.bytes == 0) << r.bytes;
        break;
      }
      out->append(reinterpret_cast<char*>(buf), static_cast<size_t>(r.bytes));
      total += static_cast<size_t>(r.bytes);
    }
    return total;
  }

 private:
  int writer_ = -1;
  int reader_ = -1;
};

// Heap copies released through a counting callback, so the tests can check
// each chunk is released exactly once (and ASan checks it is freed once).
struct ReleaseLog {
  std::vector<int> count;
};
struct Hint {
  ReleaseLog* log;
  int index;
};

void ReleaseCounted(uint8_t* data, void* hint) {
  auto* h = static_cast<Hint*>(hint);
  h->log->count[static_cast<size_t>(h->index)]++;
  delete[] data;
  delete h;
}

OutChunk MakeChunk(const std::string& s, ReleaseLog* log) {
  OutChunk c;
  c.size = s.size();
  c.data = new uint8_t[s.size() + 1];
  std::memcpy(c.data, s.data(), s.size());
  if (log != nullptr) {
    c.release = ReleaseCounted;
    c.hint = new Hint{log, static_cast<int>(log->count.size())};
    log->count.push_back(0);
  } else {
    c.release = [](uint8_t* data, void*) { delete[] data; };
  }
  return c;
}

std::string Piece(int i) { return "<" + std::to_string(i) + ":" + std::string(i % 13, 'x') + ">"; }

bool IsOpen(int fd) { return fcntl(fd, F_GETFD) != -1; }

TEST(WriteQueue, EmptyFlushIsDrained) {
  SocketPair sp;
  WriteQueue q;
  int err = 0;
  EXPECT_EQ(q.Flush(sp.writer(), &err), WriteQueue::FlushStatus::kDrained);
  EXPECT_EQ(q.write_calls(), 0u);
  EXPECT_TRUE(q.empty());
}

TEST(WriteQueue, PreservesOrderAndCoalesces) {
  SocketPair sp;
  WriteQueue q;
  ReleaseLog log;
  std::string expected;
  for (int i = 0; i < 500; i++) {
    expected += Piece(i);
    q.Push(MakeChunk(Piece(i), &log));
  }
  EXPECT_EQ(q.queued_chunks(), 500u);
  EXPECT_EQ(q.queued_bytes(), expected.size());
  EXPECT_EQ(q.total_pushed(), expected.size());
  int err = 0;
  ASSERT_EQ(q.Flush(sp.writer(), &err), WriteQueue::FlushStatus::kDrained);
  // 500 small chunks fit in one gathered sendmsg.
  EXPECT_EQ(q.write_calls(), 1u);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.queued_bytes(), 0u);
  EXPECT_EQ(q.total_written(), expected.size());
  for (size_t i = 0; i < log.count.size(); i++) EXPECT_EQ(log.count[i], 1) << "chunk " << i;
  std::string got;
  sp.Drain(&got);
  EXPECT_EQ(got, expected);
}

TEST(WriteQueue, TryWriteGoesStraightToAnIdleSocket) {
  SocketPair sp;
  // Outlives the queue, whose chunks report to it when released.
  ReleaseLog log;
  WriteQueue q;
  const std::string first = "first frame";
  EXPECT_EQ(q.TryWrite(sp.writer(), reinterpret_cast<const uint8_t*>(first.data()), first.size()),
            first.size());
  EXPECT_EQ(q.total_pushed(), first.size());
  EXPECT_EQ(q.total_written(), first.size());
  EXPECT_EQ(q.write_calls(), 1u);
  EXPECT_TRUE(q.empty());

  // With anything queued, a direct write would overtake it: refused.
  q.Push(MakeChunk("queued", &log));
  const std::string second = "second";
  EXPECT_EQ(q.TryWrite(sp.writer(), reinterpret_cast<const uint8_t*>(second.data()), second.size()), 0u);
  EXPECT_EQ(q.write_calls(), 1u);
  int err = 0;
  ASSERT_EQ(q.Flush(sp.writer(), &err), WriteQueue::FlushStatus::kDrained);
  std::string got;
  sp.Drain(&got);
  EXPECT_EQ(got, first + "queued");

  // Against a socket that fills up: only what it took is counted, and the
  // caller queues the rest, which follows in order.
  const std::string big(8u << 20, 'b');
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(big.data());
  const size_t taken = q.TryWrite(sp.writer(), bytes, big.size());
  EXPECT_GT(taken, 0u);
  EXPECT_LT(taken, big.size());
  EXPECT_EQ(q.total_written(), first.size() + 6 + taken);
  q.Push(MakeChunk(big.substr(taken), &log));
  std::string rest;
  for (int i = 0; i < 10000 && rest.size() < big.size(); i++) {
    q.Flush(sp.writer(), &err);
    sp.Drain(&rest);
  }
  EXPECT_TRUE(rest == big);
  EXPECT_TRUE(q.empty());

  // A socket whose peer is gone: nothing is taken, and the error is left
  // for the flush of the queued bytes to report.
  sp.CloseReader();
  EXPECT_EQ(q.TryWrite(sp.writer(), bytes, 100), 0u);
  q.Push(MakeChunk(big.substr(0, 100), &log));
  EXPECT_EQ(q.Flush(sp.writer(), &err), WriteQueue::FlushStatus::kError);
  EXPECT_EQ(err, EPIPE);
}

TEST(WriteQueue, MoreChunksThanIovecsTakeFewCalls) {
  SocketPair sp;
  WriteQueue q;
  std::string expected;
  const int kChunks = 3000;
  for (int i = 0; i < kChunks; i++) {
    expected += Piece(i);
    q.Push(MakeChunk(Piece(i), nullptr));
  }
  int err = 0;
  ASSERT_EQ(q.Flush(sp.writer(), &err), WriteQueue::FlushStatus::kDrained);
  // The iovec array holds 1024 entries, so 3000 chunks need 3 calls.
  EXPECT_EQ(q.write_calls(), 3u);
  std::string got;
  sp.Drain(&got);
  EXPECT_EQ(got, expected);
}

TEST(WriteQueue, ZeroLengthChunksAreReleased) {
  SocketPair sp;
  WriteQueue q;
  ReleaseLog log;
  q.Push(MakeChunk("", &log));
  q.Push(MakeChunk("ab", &log));
  q.Push(MakeChunk("", &log));
  q.Push(MakeChunk("", &log));
  q.Push(MakeChunk("cd", &log));
  q.Push(MakeChunk("", &log));
  int err = 0;
  ASSERT_EQ(q.Flush(sp.writer(), &err), WriteQueue::FlushStatus::kDrained);
  EXPECT_TRUE(q.empty());
  for (size_t i = 0; i < log.count.size(); i++) EXPECT_EQ(log.count[i], 1) << "chunk " << i;
  std::string got;
  sp.Drain(&got);
  EXPECT_EQ(got, "abcd");
}

TEST(WriteQueue, PartialWritesWhenSocketIsFull) {
  SocketPair sp;
  // A small send buffer makes the socket fill quickly.
  const int sndbuf = 16384;
  ASSERT_EQ(setsockopt(sp.writer(), SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
  WriteQueue q;
  ReleaseLog log;
  std::string expected;
  // Odd chunk sizes so the socket fills in the middle of chunks.
  for (int i = 0; i < 400; i++) {
    std::string s(static_cast<size_t>(1000 + i * 37), '\0');
    for (size_t j = 0; j < s.size(); j++) s[j] = static_cast<char>((i * 131 + j) & 0xff);
    expected += s;
    q.Push(MakeChunk(s, &log));
  }
  int err = 0;
  std::string got;
  int would_block = 0;
  WriteQueue::FlushStatus st = WriteQueue::FlushStatus::kWouldBlock;
  for (int round = 0; round < 100000 && st != WriteQueue::FlushStatus::kDrained; round++) {
    st = q.Flush(sp.writer(), &err);
    ASSERT_NE(st, WriteQueue::FlushStatus::kError) << std::strerror(err);
    if (st == WriteQueue::FlushStatus::kWouldBlock) {
      would_block++;
      ASSERT_FALSE(q.empty());
      // Invariants hold mid-chunk: what is queued plus written is all pushed.
      EXPECT_EQ(q.queued_bytes() + q.total_written(), q.total_pushed());
      // Drain only some of it, so refills start at odd offsets.
      sp.Drain(&got, 5000);
    }
  }
  ASSERT_EQ(st, WriteQueue::FlushStatus::kDrained);
  EXPECT_GT(would_block, 0);
  sp.Drain(&got);
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected);
  EXPECT_EQ(q.total_written(), expected.size());
  for (size_t i = 0; i < log.count.size(); i++) EXPECT_EQ(log.count[i], 1) << "chunk " << i;
}

TEST(WriteQueue, ClearAndDestructorReleaseOnce) {
  ReleaseLog log;
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
  {
    WriteQueue q;
    q.Push(MakeChunk("one", &log));
    OutChunk with_fd = MakeChunk("two", &log);
    with_fd.fds.push_back(pipe_fds[1]);
    q.Push(std::move(with_fd));
    q.Clear();
    EXPECT_TRUE(q.empty());
    EXPECT_EQ(q.queued_bytes(), 0u);
    EXPECT_EQ(log.count, (std::vector<int>{1, 1}));
    // The queue owned the descriptor and closed it when dropping the chunk.
    EXPECT_FALSE(IsOpen(pipe_fds[1]));
    q.Push(MakeChunk("three", &log));
  }
  EXPECT_EQ(log.count, (std::vector<int>{1, 1, 1}));
  CloseFd(pipe_fds[0]);
}

TEST(WriteQueue, FdsArriveWithFirstByteOfTheirChunk) {
  SocketPair sp;
  WriteQueue q;
  int pipe_a[2], pipe_b[2];
  ASSERT_EQ(pipe2(pipe_a, O_CLOEXEC | O_NONBLOCK), 0);
  ASSERT_EQ(pipe2(pipe_b, O_CLOEXEC | O_NONBLOCK), 0);
  // Chunk 1 has no descriptors; chunk 2 carries pipe_a's write end; chunk 3
  // none; chunk 4 carries pipe_b's write end and pipe_a's again.
  q.Push(MakeChunk("AAAA", nullptr));
  OutChunk c2 = MakeChunk("BBB", nullptr);
  c2.fds.push_back(dup(pipe_a[1]));
  q.Push(std::move(c2));
  q.Push(MakeChunk("CC", nullptr));
  OutChunk c4 = MakeChunk("DDDDD", nullptr);
  c4.fds.push_back(dup(pipe_b[1]));
  c4.fds.push_back(dup(pipe_a[1]));
  const int sent_b = c4.fds[0];
  q.Push(std::move(c4));
  int err = 0;
  ASSERT_EQ(q.Flush(sp.writer(), &err), WriteQueue::FlushStatus::kDrained);
  // A chunk with descriptors starts its own sendmsg: [A], [B C], [D].
  EXPECT_EQ(q.write_calls(), 3u);
  // The queue closed its copies once the kernel held them.
  EXPECT_FALSE(IsOpen(sent_b));

  // Read one byte at a time: descriptors must come with exactly the first
  // byte of their chunk, never earlier or later.
  const std::string expected = "AAAABBBCCDDDDD";
  std::string got;
  std::vector<std::vector<int>> fds_at(expected.size());
  for (size_t i = 0; i < expected.size(); i++) {
    uint8_t b;
    ReadOutcome r = ReceiveWithFds(sp.reader(), &b, 1, &fds_at[i]);
    ASSERT_EQ(r.bytes, 1) << "byte " << i;
    got.push_back(static_cast<char>(b));
  }
  EXPECT_EQ(got, expected);
  for (size_t i = 0; i < expected.size(); i++) {
    const size_t want = i == 4 ? 1 : i == 9 ? 2 : 0;
    EXPECT_EQ(fds_at[i].size(), want) << "byte " << i;
  }
  ASSERT_EQ(fds_at[4].size(), 1u);
  ASSERT_EQ(fds_at[9].size(), 2u);
  // The received descriptors are live, close-on-exec, and refer to the
  // right pipes.
  EXPECT_EQ(fcntl(fds_at[4][0], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  ASSERT_EQ(write(fds_at[4][0], "a", 1), 1);
  ASSERT_EQ(write(fds_at[9][0], "b", 1), 1);
  ASSERT_EQ(write(fds_at[9][1], "c", 1), 1);
  char buf[4];
  EXPECT_EQ(read(pipe_a[0], buf, sizeof(buf)), 2);
  EXPECT_EQ(read(pipe_b[0], buf, 1), 1);
  EXPECT_EQ(buf[0], 'b');
  for (auto& v : fds_at) {
    for (int fd : v) CloseFd(fd);
  }
  for (int fd : {pipe_a[0], pipe_a[1], pipe_b[0], pipe_b[1]}) CloseFd(fd);
}

TEST(WriteQueue, FdsSurviveAPartialWriteOfTheirChunk) {
  SocketPair sp;
  const int sndbuf = 8192;
  ASSERT_EQ(setsockopt(sp.writer(), SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
  WriteQueue q;
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK), 0);
  const std::string big(200000, 'z');
  OutChunk c = MakeChunk(big, nullptr);
  c.fds.push_back(dup(pipe_fds[1]));
  q.Push(std::move(c));
  q.Push(MakeChunk("end", nullptr));
  int err = 0;
  std::string got;
  std::vector<int> received;
  size_t fd_offset = SIZE_MAX;
  WriteQueue::FlushStatus st = WriteQueue::FlushStatus::kWouldBlock;
  for (int round = 0; round < 100000 && st != WriteQueue::FlushStatus::kDrained; round++) {
    st = q.Flush(sp.writer(), &err);
    ASSERT_NE(st, WriteQueue::FlushStatus::kError) << std::strerror(err);
    for (;;) {
      uint8_t buf[4096];
      const size_t before = received.size();
      ReadOutcome r = ReceiveWithFds(sp.reader(), buf, sizeof(buf), &received);
      if (r.bytes <= 0) break;
      if (received.size() != before) fd_offset = got.size();
      got.append(reinterpret_cast<char*>(buf), static_cast<size_t>(r.bytes));
    }
  }
  ASSERT_EQ(st, WriteQueue::FlushStatus::kDrained);
  EXPECT_GT(q.write_calls(), 2u);
  EXPECT_TRUE(got == big + "end");
  // Sent once, with the chunk's first byte.
  ASSERT_EQ(received.size(), 1u);
  EXPECT_EQ(fd_offset, 0u);
  for (int fd : received) CloseFd(fd);
  CloseFd(pipe_fds[0]);
  CloseFd(pipe_fds[1]);
}

TEST(WriteQueue, PeerCloseIsAnError) {
  SocketPair sp;
  sp.CloseReader();
  WriteQueue q;
  ReleaseLog log;
  q.Push(MakeChunk("hello", &log));
  int err = 0;
  // MSG_NOSIGNAL means no SIGPIPE; if it were raised the test would die.
  ASSERT_EQ(q.Flush(sp.writer(), &err), WriteQueue::FlushStatus::kError);
  EXPECT_EQ(err, EPIPE);
  // Nothing was written, so nothing is released or lost.
  EXPECT_FALSE(q.empty());
  EXPECT_EQ(q.queued_bytes(), 5u);
  EXPECT_EQ(q.total_written(), 0u);
  EXPECT_EQ(log.count[0], 0);
  q.Clear();
  EXPECT_EQ(log.count[0], 1);
}

TEST(WriteQueue, BadDescriptorIsAnError) {
  WriteQueue q;
  q.Push(MakeChunk("x", nullptr));
  int err = 0;
  EXPECT_EQ(q.Flush(-1, &err), WriteQueue::FlushStatus::kError);
  EXPECT_EQ(err, EBADF);
}

}  // namespace
}  // namespace procwire
