#include "socket_io.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace procwire {

namespace {

// Fills a sockaddr_un; returns its length or -ENAMETOOLONG.
int MakeUnixAddress(const std::string& path, bool abstract, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  // One byte goes to the terminating NUL, or to the leading NUL of an
  // abstract name.
  const size_t room = sizeof(addr->sun_path) - 1;
  if (path.empty() || path.size() > room) return -ENAMETOOLONG;
  if (abstract) {
    // Abstract names start with a NUL byte and are not NUL-terminated.
    std::memcpy(addr->sun_path + 1, path.data(), path.size());
    return static_cast<int>(offsetof(sockaddr_un, sun_path) + 1 + path.size());
  }
  std::memcpy(addr->sun_path, path.data(), path.size());
  return static_cast<int>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
}

// Fills a sockaddr for a numeric address; returns its length or -EINVAL.
int MakeInetAddress(const std::string& host, int port, sockaddr_storage* ss) {
  std::memset(ss, 0, sizeof(*ss));
  auto* v4 = reinterpret_cast<sockaddr_in*>(ss);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    return sizeof(sockaddr_in);
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(ss);
  if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    return sizeof(sockaddr_in6);
  }
  return -EINVAL;
}

int FinishConnect(int fd, const sockaddr* addr, socklen_t len, bool* in_progress) {
  *in_progress = false;
  int r;
  do {
    r = connect(fd, addr, len);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return fd;
  // Only EINPROGRESS means "connecting". On a unix socket EAGAIN means the
  // server's backlog is full (nobody is accepting): a failed connect, not
  // one in progress that would later look connected and then fail.
  if (errno == EINPROGRESS) {
    *in_progress = true;
    return fd;
  }
  const int err = errno;
  CloseFd(fd);
  return -err;
}

}  // namespace

void CloseFd(int fd) {
  if (fd < 0) return;
  // Linux closes the descriptor even when close is interrupted; retrying
  // could close a descriptor another thread just opened.
  close(fd);
}

ssize_t SendVectors(int fd, const iovec* iov, int iov_count, const int* fds, int fd_count) {
  msghdr msg;
  std::memset(&msg, 0, sizeof(msg));
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(iov_count);
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerRead)];
  if (fd_count > 0) {
    if (fd_count > kMaxFdsPerRead) return -EINVAL;
    const size_t payload = sizeof(int) * static_cast<size_t>(fd_count);
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(payload);
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(payload);
    std::memcpy(CMSG_DATA(cmsg), fds, payload);
  }
  ssize_t n;
  do {
    n = sendmsg(fd, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n < 0 ? -errno : n;
}

ReadOutcome ReceiveWithFds(int fd, uint8_t* buf, size_t size, std::vector<int>* fds) {
  ReadOutcome out;
  iovec iov{buf, size};
  msghdr msg;
  std::memset(&msg, 0, sizeof(msg));
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerRead)];
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    out.bytes = -errno;
    return out;
  }
  out.bytes = n;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const int* received = reinterpret_cast<const int*>(CMSG_DATA(c));
    for (size_t i = 0; i < count; i++) {
      int d;
      std::memcpy(&d, received + i, sizeof(int));
      if (fds != nullptr) {
        fds->push_back(d);
      } else {
        CloseFd(d);
      }
    }
  }
  return out;
}

void WidenUnixSendBuffer(int fd) {
  int domain = 0;
  socklen_t len = sizeof(domain);
  // TCP sizes its buffers itself; a fixed SO_SNDBUF would turn that off.
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0 || domain != AF_UNIX) return;
  int before = 0;
  len = sizeof(before);
  if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &before, &len) < 0) return;
  // The kernel reports (and keeps) twice the size asked for: the other half
  // pays for its bookkeeping.
  if (before >= 2 * kUnixSendBufferSize) return;
  const int want = kUnixSendBufferSize;
  // Unprivileged requests are capped at net.core.wmem_max, never refused for
  // their size; a cap below the default would shrink the buffer, so the
  // default is put back then.
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want)) < 0) return;
  int after = 0;
  len = sizeof(after);
  if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &after, &len) == 0 && after < before) {
    const int restore = before / 2;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &restore, sizeof(restore));
  }
}

int MakeSocketPair(int fds[2]) {
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0) return -errno;
  const int r = SetNonBlocking(fds[0], true);
  if (r < 0) {
    CloseFd(fds[0]);
    CloseFd(fds[1]);
    return r;
  }
  return 0;
}

int SetNonBlocking(int fd, bool on) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return -errno;
  const int want = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (want != flags && fcntl(fd, F_SETFL, want) < 0) return -errno;
  return 0;
}

int ListenUnix(const std::string& path, bool abstract, int backlog) {
  sockaddr_un addr;
  const int len = MakeUnixAddress(path, abstract, &addr);
  if (len < 0) return len;
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  // The socket file is made 0600 between bind and listen. The process-wide
  // umask is not touched (other threads may be creating files), and there is
  // no window for another user: a socket that is bound but not yet listening
  // refuses every connection.
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), static_cast<socklen_t>(len)) < 0) {
    const int err = errno;
    CloseFd(fd);
    return -err;
  }
  if (!abstract && chmod(path.c_str(), 0600) < 0) {
    const int err = errno;
    CloseFd(fd);
    return -err;
  }
  if (listen(fd, backlog) < 0) {
    const int err = errno;
    CloseFd(fd);
    return -err;
  }
  return fd;
}

int ConnectUnix(const std::string& path, bool abstract, bool* in_progress) {
  sockaddr_un addr;
  const int len = MakeUnixAddress(path, abstract, &addr);
  if (len < 0) return len;
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  return FinishConnect(fd, reinterpret_cast<sockaddr*>(&addr), static_cast<socklen_t>(len), in_progress);
}

int ListenTcp(const std::string& host, int port, int backlog, int* bound_port) {
  sockaddr_storage ss;
  const int len = MakeInetAddress(host, port, &ss);
  if (len < 0) return len;
  const int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), static_cast<socklen_t>(len)) < 0 ||
      listen(fd, backlog) < 0) {
    const int err = errno;
    CloseFd(fd);
    return -err;
  }
  sockaddr_storage bound;
  socklen_t blen = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &blen) == 0) {
    *bound_port = bound.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port)
                                             : ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  }
  return fd;
}

int ConnectTcp(const std::string& host, int port, bool* in_progress) {
  sockaddr_storage ss;
  const int len = MakeInetAddress(host, port, &ss);
  if (len < 0) return len;
  const int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  SetNoDelay(fd);
  return FinishConnect(fd, reinterpret_cast<sockaddr*>(&ss), static_cast<socklen_t>(len), in_progress);
}

int AcceptConnection(int listen_fd) {
  int fd;
  do {
    fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return -errno;
  SetNoDelay(fd);
  return fd;
}

int SocketError(int fd) {
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) return -errno;
  return -err;
}

int GetPeerCredentials(int fd, PeerCredentials* out) {
  ucred cred;
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) return -errno;
  out->pid = cred.pid;
  out->uid = static_cast<int>(cred.uid);
  out->gid = static_cast<int>(cred.gid);
  return 0;
}

void SetNoDelay(int fd) {
  const int one = 1;
  // Fails harmlessly with EOPNOTSUPP on unix sockets.
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace procwire
