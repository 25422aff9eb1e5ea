// Thin, errno-free wrappers over the POSIX socket calls procwire needs:
// gathered sends with descriptors (SCM_RIGHTS), reads that collect passed
// descriptors, socket pairs, unix and TCP listeners and connectors, and peer
// credentials. Every function returns a non-negative result or -errno, and
// retries EINTR itself.
//
// Ownership: functions that return descriptors hand them to the caller, who
// closes them (CloseFd). Every descriptor made here is close-on-exec and, unless
// stated, non-blocking.
// Threading: stateless; safe from any thread.
#ifndef PROCWIRE_CORE_SOCKET_IO_H_
#define PROCWIRE_CORE_SOCKET_IO_H_

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace procwire {

// The most descriptors accepted in one read; the kernel closes the rest
// (MSG_CTRUNC), so a hostile peer cannot exhaust our descriptor table in one
// message.
constexpr int kMaxFdsPerRead = 64;

void CloseFd(int fd);

// sendmsg(2) with MSG_NOSIGNAL; fds (may be null) travel as SCM_RIGHTS.
ssize_t SendVectors(int fd, const iovec* iov, int iov_count, const int* fds, int fd_count);

struct ReadOutcome {
  // Bytes read; 0 at end of stream; -errno on failure.
  ssize_t bytes = 0;
};

// recvmsg(2) into buf; descriptors that arrive are appended to *fds (if fds
// is null they are closed at once).
ReadOutcome ReceiveWithFds(int fd, uint8_t* buf, size_t size, std::vector<int>* fds);

// What procwire asks for as a unix stream socket's send buffer, which for a
// unix socket bounds the bytes in flight towards its peer (the receiver has
// no limit of its own). The kernel default (net.core.wmem_default, 208 KiB)
// is a fifth of a 1 MiB message: the two processes then took turns, each
// waiting for the other to read, and a plain Node child echoing 1 MiB json
// at 16 in flight ran both at about 55% of a CPU. With 2 MiB (capped at
// net.core.wmem_max) json round trips went from 150 to 280/s at 1 MiB and
// from 720 to 1,060/s at 256 KiB. The kernel charges the memory only while
// bytes wait: bytes the sender would otherwise hold in its own queue. Small
// messages do better with the default, whose backpressure gathers them
// into fewer, larger writes (1 KiB messages between procwire peers over the
// socket, 256 in flight: 1.08M round trips/s with it, 0.82M with 2 MiB), so
// a channel widens its socket when it first sends a large frame.
constexpr int kUnixSendBufferSize = 2 * 1024 * 1024;

// Raises a unix stream socket's send buffer to kUnixSendBufferSize (within
// net.core.wmem_max, never below what it was). Other sockets are left
// alone: TCP sizes its own buffers.
void WidenUnixSendBuffer(int fd);

// An AF_UNIX stream pair, both ends close-on-exec. fds[0] is non-blocking, for
// this process; fds[1] is left blocking for a child (spawn dup2s it into the
// child's descriptor slot, which clears close-on-exec there).
int MakeSocketPair(int fds[2]);

int SetNonBlocking(int fd, bool on);

// Binds and listens on a unix socket path (or, when abstract is true, a name
// in Linux's abstract namespace). The path's file gets mode 0600.
int ListenUnix(const std::string& path, bool abstract, int backlog);
// Starts a non-blocking connect; returns the fd (connected or in progress)
// or -errno. *in_progress tells which.
int ConnectUnix(const std::string& path, bool abstract, bool* in_progress);

// host must be a numeric IPv4 or IPv6 address (JS resolves names first).
// Returns the listening fd; *bound_port receives the port (for port 0).
int ListenTcp(const std::string& host, int port, int backlog, int* bound_port);
int ConnectTcp(const std::string& host, int port, bool* in_progress);

// accept4(2), non-blocking and close-on-exec. -EAGAIN when none is pending.
int AcceptConnection(int listen_fd);

// The socket's pending error (SO_ERROR, which reading clears): 0 when there
// is none (a non-blocking connect succeeded), else -errno.
int SocketError(int fd);

struct PeerCredentials {
  int pid = -1;
  int uid = -1;
  int gid = -1;
};
// SO_PEERCRED for a unix socket; -errno when not available.
int GetPeerCredentials(int fd, PeerCredentials* out);

// Disables Nagle's algorithm on TCP sockets (ignored for others).
void SetNoDelay(int fd);

}  // namespace procwire

#endif  // PROCWIRE_CORE_SOCKET_IO_H_
