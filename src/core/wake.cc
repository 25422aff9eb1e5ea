#include "wake.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace procwire {

int WakeLinkCreate(int* waiter, int* signaller) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) return -errno;
  *waiter = fds[0];
  *signaller = fds[1];
  return 0;
}

bool IsWakeLinkEnd(int fd) {
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  int value = 0;
  socklen_t len = sizeof(value);
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &value, &len) != 0 || value != AF_UNIX) return false;
  len = sizeof(value);
  return getsockopt(fd, SOL_SOCKET, SO_TYPE, &value, &len) == 0 && value == SOCK_STREAM;
}

int WakeLinkSignal(int fd) {
  const uint8_t one = 1;
  for (;;) {
    if (send(fd, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1) return 0;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -errno;
  }
}

WakeDrain WakeLinkDrain(int fd, int max_reads) {
  uint8_t buf[256];
  for (int i = 0; i < max_reads; i++) {
    const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) return WakeDrain::kClosed;
    if (n < 0) {
      if (errno == EINTR) {
        i--;
        continue;
      }
      // EAGAIN: empty. Any other error leaves nothing to read either.
      return WakeDrain::kDrained;
    }
    if (static_cast<size_t>(n) < sizeof(buf)) return WakeDrain::kDrained;
  }
  return WakeDrain::kFlooded;
}

}  // namespace procwire
