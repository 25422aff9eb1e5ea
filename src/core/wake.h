// Wake-up links: how the writer of a ring wakes its sleeping reader.
//
// The side that waits creates the link (as Mojo's and iceoryx2's listeners
// do): a unix stream socket pair whose one end the reader keeps and polls,
// and whose other end it hands to the writer. The two ends are separate open
// file descriptions, so nothing the writer does to its end (file status
// flags, O_ASYNC, F_SETOWN, passing it to a third process) changes the end
// the reader polls, and every call here is non-blocking per call
// (MSG_DONTWAIT), whatever flags a peer set on a shared description. An
// eventfd the peer created, as rings used before, failed both ways: a
// semaphore eventfd stays readable after a read, and a peer holding the same
// description can clear O_NONBLOCK and make a read or a write block.
//
// No V8, no libuv. Threading: any; each call is one or a few system calls.
#ifndef PROCWIRE_CORE_WAKE_H_
#define PROCWIRE_CORE_WAKE_H_

#include <cstddef>

namespace procwire {

// Creates a link: *waiter is the end to poll and drain, *signaller the end
// to signal through. Both are non-blocking and close-on-exec. Returns 0 or
// -errno.
int WakeLinkCreate(int* waiter, int* signaller);

// Whether `fd` can be a link's signalling end from a peer: a unix stream
// socket. Anything else (an eventfd, a pipe, a file) is refused.
bool IsWakeLinkEnd(int fd);

// Writes one wake-up byte without blocking. A full link is already as
// signalled as it can be (0). Returns 0 or -errno (-EPIPE once the link
// was shut down).
int WakeLinkSignal(int fd);

enum class WakeDrain {
  kDrained,  // The link is empty now (or was: a spurious wake-up).
  kFlooded,  // Still readable after the bound: far more wake-ups than rings
             // produce; the caller decides whether that is progress.
  kClosed,   // The link was shut down (end of stream): it stays readable.
};

// Reads what the link holds, at most `max_reads` reads of 256 bytes, and
// says how the link was left.
WakeDrain WakeLinkDrain(int fd, int max_reads);

}  // namespace procwire

#endif  // PROCWIRE_CORE_WAKE_H_
