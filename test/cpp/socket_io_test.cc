// Tests for the socket wrappers: socket pairs, unix listeners (path and
// abstract), TCP on loopback, peer credentials, and descriptor receipt.
#include "socket_io.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace procwire {
namespace {

// Every wait in these tests is bounded so a broken build fails, not hangs.
constexpr int kWaitMs = 5000;

bool WaitFor(int fd, short events) {
  pollfd p{fd, events, 0};
  int r;
  do {
    r = poll(&p, 1, kWaitMs);
  } while (r < 0 && errno == EINTR);
  return r == 1 && (p.revents & (events | POLLERR | POLLHUP)) != 0;
}

bool IsNonBlocking(int fd) { return (fcntl(fd, F_GETFL) & O_NONBLOCK) != 0; }
bool IsCloseOnExec(int fd) { return (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0; }

// A private temporary directory, removed with its contents afterwards.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/procwire-test-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) != nullptr) path_ = buf.data();
  }
  ~TempDir() {
    for (const std::string& f : files_) unlink(f.c_str());
    if (!path_.empty()) rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) {
    files_.push_back(path_ + "/" + name);
    return files_.back();
  }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

// Sends "ping" one way and "pong" back over a connected pair.
void ExpectEcho(int a, int b) {
  iovec iov{const_cast<char*>("ping"), 4};
  ASSERT_EQ(SendVectors(a, &iov, 1, nullptr, 0), 4);
  ASSERT_TRUE(WaitFor(b, POLLIN));
  uint8_t buf[16];
  ReadOutcome r = ReceiveWithFds(b, buf, sizeof(buf), nullptr);
  ASSERT_EQ(r.bytes, 4);
  EXPECT_EQ(std::memcmp(buf, "ping", 4), 0);
  iov = iovec{const_cast<char*>("pong"), 4};
  ASSERT_EQ(SendVectors(b, &iov, 1, nullptr, 0), 4);
  ASSERT_TRUE(WaitFor(a, POLLIN));
  r = ReceiveWithFds(a, buf, sizeof(buf), nullptr);
  ASSERT_EQ(r.bytes, 4);
  EXPECT_EQ(std::memcmp(buf, "pong", 4), 0);
}

// Accepts one connection, waiting for it to arrive.
int AcceptOne(int listen_fd) {
  int fd = AcceptConnection(listen_fd);
  if (fd == -EAGAIN && WaitFor(listen_fd, POLLIN)) fd = AcceptConnection(listen_fd);
  return fd;
}

// Completes a non-blocking connect.
void FinishConnect(int fd, bool in_progress) {
  if (in_progress) {
    ASSERT_TRUE(WaitFor(fd, POLLOUT));
  }
  EXPECT_EQ(SocketError(fd), 0);
}

TEST(SocketIo, SocketPairFlags) {
  int fds[2];
  ASSERT_EQ(MakeSocketPair(fds), 0);
  EXPECT_TRUE(IsNonBlocking(fds[0]));
  EXPECT_FALSE(IsNonBlocking(fds[1]));
  EXPECT_TRUE(IsCloseOnExec(fds[0]));
  EXPECT_TRUE(IsCloseOnExec(fds[1]));
  ASSERT_EQ(SetNonBlocking(fds[1], true), 0);
  EXPECT_TRUE(IsNonBlocking(fds[1]));
  ASSERT_EQ(SetNonBlocking(fds[1], false), 0);
  EXPECT_FALSE(IsNonBlocking(fds[1]));
  ExpectEcho(fds[0], fds[1]);
  // An empty non-blocking socket reports EAGAIN, not end of stream.
  uint8_t b;
  EXPECT_EQ(ReceiveWithFds(fds[0], &b, 1, nullptr).bytes, -EAGAIN);
  CloseFd(fds[1]);
  EXPECT_EQ(ReceiveWithFds(fds[0], &b, 1, nullptr).bytes, 0);
  CloseFd(fds[0]);
}

int SendBufferSize(int fd) {
  int size = -1;
  socklen_t len = sizeof(size);
  if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, &len) < 0) return -1;
  return size;
}

// What a widened unix socket reports: twice the request, or twice
// net.core.wmem_max when that caps it, but never less than the default.
int ExpectedWidenedSendBuffer(int default_size) {
  long wmem_max = kUnixSendBufferSize;
  if (FILE* f = std::fopen("/proc/sys/net/core/wmem_max", "r")) {
    if (std::fscanf(f, "%ld", &wmem_max) != 1) wmem_max = kUnixSendBufferSize;
    std::fclose(f);
  }
  const long asked = std::min<long>(kUnixSendBufferSize, wmem_max);
  return static_cast<int>(std::max<long>(default_size, 2 * asked));
}

TEST(SocketIo, WidenedUnixSendBuffersTcpLeftAlone) {
  int plain[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, plain), 0);
  const int default_size = SendBufferSize(plain[0]);
  ASSERT_GT(default_size, 0);
  CloseFd(plain[0]);
  CloseFd(plain[1]);
  const int expected = ExpectedWidenedSendBuffer(default_size);

  // A new pair keeps the default (its channel widens it when it first
  // sends a large frame).
  int fds[2];
  ASSERT_EQ(MakeSocketPair(fds), 0);
  EXPECT_EQ(SendBufferSize(fds[0]), default_size);
  EXPECT_EQ(SendBufferSize(fds[1]), default_size);
  WidenUnixSendBuffer(fds[0]);
  EXPECT_EQ(SendBufferSize(fds[0]), expected);
  EXPECT_EQ(SendBufferSize(fds[1]), default_size) << "each end has its own";
  // A second call changes nothing.
  WidenUnixSendBuffer(fds[0]);
  EXPECT_EQ(SendBufferSize(fds[0]), expected);
  ExpectEcho(fds[0], fds[1]);
  CloseFd(fds[0]);
  CloseFd(fds[1]);

  // Both ends of a named channel.
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const int lfd = ListenUnix(dir.File("sock"), false, 8);
  ASSERT_GE(lfd, 0) << std::strerror(-lfd);
  bool in_progress = true;
  const int cfd = ConnectUnix(dir.File("sock"), false, &in_progress);
  ASSERT_GE(cfd, 0) << std::strerror(-cfd);
  FinishConnect(cfd, in_progress);
  const int afd = AcceptOne(lfd);
  ASSERT_GE(afd, 0) << std::strerror(-afd);
  WidenUnixSendBuffer(cfd);
  WidenUnixSendBuffer(afd);
  EXPECT_EQ(SendBufferSize(cfd), expected);
  EXPECT_EQ(SendBufferSize(afd), expected);
  CloseFd(afd);
  CloseFd(cfd);
  CloseFd(lfd);

  // TCP tunes its own buffers: a fixed size would stop that.
  const int tcp = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(tcp, 0);
  const int tcp_before = SendBufferSize(tcp);
  WidenUnixSendBuffer(tcp);
  EXPECT_EQ(SendBufferSize(tcp), tcp_before);
  CloseFd(tcp);
}

TEST(SocketIo, UnixListenConnectAccept) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string path = dir.File("sock");
  const int lfd = ListenUnix(path, false, 8);
  ASSERT_GE(lfd, 0) << std::strerror(-lfd);
  EXPECT_TRUE(IsNonBlocking(lfd));
  EXPECT_TRUE(IsCloseOnExec(lfd));

  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);

  // Nothing pending yet.
  EXPECT_EQ(AcceptConnection(lfd), -EAGAIN);

  bool in_progress = true;
  const int cfd = ConnectUnix(path, false, &in_progress);
  ASSERT_GE(cfd, 0) << std::strerror(-cfd);
  FinishConnect(cfd, in_progress);
  const int afd = AcceptOne(lfd);
  ASSERT_GE(afd, 0) << std::strerror(-afd);
  EXPECT_TRUE(IsNonBlocking(afd));
  EXPECT_TRUE(IsCloseOnExec(afd));
  ExpectEcho(cfd, afd);

  PeerCredentials cred;
  ASSERT_EQ(GetPeerCredentials(afd, &cred), 0);
  EXPECT_EQ(cred.pid, static_cast<int>(getpid()));
  EXPECT_EQ(cred.uid, static_cast<int>(getuid()));
  EXPECT_EQ(cred.gid, static_cast<int>(getgid()));
  ASSERT_EQ(GetPeerCredentials(cfd, &cred), 0);
  EXPECT_EQ(cred.pid, static_cast<int>(getpid()));

  // The listener keeps its address while open.
  const int again = ListenUnix(path, false, 8);
  EXPECT_EQ(again, -EADDRINUSE);
  CloseFd(again);

  CloseFd(afd);
  CloseFd(cfd);
  CloseFd(lfd);
}

TEST(SocketIo, UnixListenRestoresUmask) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const mode_t before = umask(022);
  const int lfd = ListenUnix(dir.File("s"), false, 1);
  ASSERT_GE(lfd, 0);
  EXPECT_EQ(umask(before), 022u);
  CloseFd(lfd);
}

TEST(SocketIo, UnixConnectErrors) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  bool in_progress = true;
  EXPECT_EQ(ConnectUnix(dir.path() + "/missing", false, &in_progress), -ENOENT);
  EXPECT_EQ(ConnectUnix("", false, &in_progress), -ENAMETOOLONG);
  EXPECT_EQ(ListenUnix(std::string(200, 'a'), false, 1), -ENAMETOOLONG);
  EXPECT_EQ(ListenUnix("", true, 1), -ENAMETOOLONG);
  EXPECT_EQ(ListenUnix(dir.path() + "/no/such/dir/sock", false, 1), -ENOENT);
}

TEST(SocketIo, AbstractNamespace) {
  std::random_device rd;
  const std::string name = "procwire-test-" + std::to_string(getpid()) + "-" + std::to_string(rd());
  const int lfd = ListenUnix(name, true, 8);
  ASSERT_GE(lfd, 0) << std::strerror(-lfd);
  // Abstract names leave no file behind.
  struct stat st;
  EXPECT_NE(stat(name.c_str(), &st), 0);
  // The same name is taken while the listener lives.
  EXPECT_EQ(ListenUnix(name, true, 8), -EADDRINUSE);

  bool in_progress = true;
  const int cfd = ConnectUnix(name, true, &in_progress);
  ASSERT_GE(cfd, 0) << std::strerror(-cfd);
  FinishConnect(cfd, in_progress);
  const int afd = AcceptOne(lfd);
  ASSERT_GE(afd, 0);
  ExpectEcho(cfd, afd);
  PeerCredentials cred;
  ASSERT_EQ(GetPeerCredentials(afd, &cred), 0);
  EXPECT_EQ(cred.uid, static_cast<int>(getuid()));
  EXPECT_EQ(cred.pid, static_cast<int>(getpid()));
  CloseFd(afd);
  CloseFd(cfd);
  CloseFd(lfd);
  // A name without a listener refuses connections.
  EXPECT_EQ(ConnectUnix(name, true, &in_progress), -ECONNREFUSED);
}

TEST(SocketIo, TcpLoopbackEphemeralPort) {
  int port = -1;
  const int lfd = ListenTcp("127.0.0.1", 0, 8, &port);
  ASSERT_GE(lfd, 0) << std::strerror(-lfd);
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
  EXPECT_TRUE(IsNonBlocking(lfd));
  EXPECT_TRUE(IsCloseOnExec(lfd));

  bool in_progress = false;
  const int cfd = ConnectTcp("127.0.0.1", port, &in_progress);
  ASSERT_GE(cfd, 0) << std::strerror(-cfd);
  FinishConnect(cfd, in_progress);
  const int afd = AcceptOne(lfd);
  ASSERT_GE(afd, 0) << std::strerror(-afd);
  ExpectEcho(cfd, afd);
  // Nagle is off on both ends.
  int nodelay = 0;
  socklen_t len = sizeof(nodelay);
  ASSERT_EQ(getsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &nodelay, &len), 0);
  EXPECT_NE(nodelay, 0);
  CloseFd(afd);
  CloseFd(cfd);
  CloseFd(lfd);
}

TEST(SocketIo, TcpErrors) {
  int port = -1;
  EXPECT_EQ(ListenTcp("not-an-address", 0, 1, &port), -EINVAL);
  bool in_progress = false;
  EXPECT_EQ(ConnectTcp("localhost", 80, &in_progress), -EINVAL);
  // A port that was just free refuses the connection, now or on completion.
  const int lfd = ListenTcp("127.0.0.1", 0, 1, &port);
  ASSERT_GE(lfd, 0);
  CloseFd(lfd);
  const int cfd = ConnectTcp("127.0.0.1", port, &in_progress);
  if (cfd >= 0) {
    ASSERT_TRUE(in_progress);
    ASSERT_TRUE(WaitFor(cfd, POLLOUT));
    EXPECT_EQ(SocketError(cfd), -ECONNREFUSED);
    CloseFd(cfd);
  } else {
    EXPECT_EQ(cfd, -ECONNREFUSED);
  }
}

TEST(SocketIo, SendVectorsRejectsTooManyFds) {
  int fds[2];
  ASSERT_EQ(MakeSocketPair(fds), 0);
  std::vector<int> many(kMaxFdsPerRead + 1, fds[1]);
  iovec iov{const_cast<char*>("x"), 1};
  EXPECT_EQ(SendVectors(fds[0], &iov, 1, many.data(), static_cast<int>(many.size())), -EINVAL);
  CloseFd(fds[0]);
  CloseFd(fds[1]);
}

// Sends `count` duplicates of fd with one byte, bypassing SendVectors' own
// limit so the receiving side's limit can be tested.
void SendRawFds(int sock, int fd, int count) {
  std::vector<int> dups(static_cast<size_t>(count), fd);
  const size_t payload = sizeof(int) * dups.size();
  std::vector<char> control(CMSG_SPACE(payload));
  char byte = 'x';
  iovec iov{&byte, 1};
  msghdr msg;
  std::memset(&msg, 0, sizeof(msg));
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(payload);
  std::memcpy(CMSG_DATA(c), dups.data(), payload);
  ASSERT_EQ(sendmsg(sock, &msg, 0), 1) << std::strerror(errno);
}

// True when every write end of the pipe is closed: reading gives EOF.
bool PipeWritersGone(int read_end) {
  char c;
  return read(read_end, &c, 1) == 0;
}

TEST(SocketIo, ReceiveWithNullFdsClosesThem) {
  int sp[2];
  ASSERT_EQ(MakeSocketPair(sp), 0);
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
  SendRawFds(sp[1], p[1], 3);
  CloseFd(p[1]);
  // The pipe's write end now lives only in the socket's queue.
  EXPECT_FALSE(PipeWritersGone(p[0]));
  uint8_t b;
  ReadOutcome r = ReceiveWithFds(sp[0], &b, 1, nullptr);
  ASSERT_EQ(r.bytes, 1);
  EXPECT_TRUE(PipeWritersGone(p[0]));
  CloseFd(p[0]);
  CloseFd(sp[0]);
  CloseFd(sp[1]);
}

TEST(SocketIo, ReceiveTruncatesExcessFds) {
  int sp[2];
  ASSERT_EQ(MakeSocketPair(sp), 0);
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
  SendRawFds(sp[1], p[1], kMaxFdsPerRead + 6);
  CloseFd(p[1]);
  uint8_t b;
  std::vector<int> got;
  ReadOutcome r = ReceiveWithFds(sp[0], &b, 1, &got);
  ASSERT_EQ(r.bytes, 1);
  EXPECT_EQ(got.size(), static_cast<size_t>(kMaxFdsPerRead));
  for (int fd : got) {
    EXPECT_TRUE(IsCloseOnExec(fd));
    CloseFd(fd);
  }
  // The ones that did not fit were not leaked into this process.
  EXPECT_TRUE(PipeWritersGone(p[0]));
  CloseFd(p[0]);
  CloseFd(sp[0]);
  CloseFd(sp[1]);
}

TEST(SocketIo, ReceiveOnBadDescriptor) {
  uint8_t b;
  EXPECT_EQ(ReceiveWithFds(-1, &b, 1, nullptr).bytes, -EBADF);
}

}  // namespace
}  // namespace procwire
