// Sealed shared-memory segments (Linux memfd) for messages sent out of line.
//
// A sender copies bytes into a fresh memfd (or hands over one made by
// CreateSegment and filled through a shared mapping), seals it against
// writing, shrinking and growing, and passes the descriptor with SCM_RIGHTS.
// The receiver checks the seals and size, then maps it privately: it sees
// exactly the bytes that were sealed, and its own writes stay its own
// (copy-on-write). A memfd has no name in any filesystem, so nothing is left
// behind when a process dies, however it dies.
//
// Ownership: functions returning a descriptor or mapping hand it to the
// caller (CloseFd / UnmapSegment). Threading: stateless; any thread.
#ifndef PROCWIRE_CORE_SHM_H_
#define PROCWIRE_CORE_SHM_H_

#include <cstddef>
#include <cstdint>

namespace procwire {

// The seals a received segment must carry.
int RequiredSeals();

// A new, empty-content memfd of `size` bytes (close-on-exec, sealable).
// Returns the fd or -errno.
int CreateSegment(size_t size);

// A new memfd holding a copy of data[0, size), already sealed. Returns the fd
// or -errno.
int CreateSealedCopy(const uint8_t* data, size_t size);

// Adds the write/shrink/grow/seal seals. Fails with -EBUSY while a shared
// writable mapping of the segment exists.
int SealSegment(int fd);

// Checks that fd is a memfd carrying RequiredSeals() and returns its size in
// *size. Returns 0, -EPERM when seals are missing, or -errno.
int VerifySegment(int fd, size_t* size);

// Maps a segment: shared read-write (for segments being filled) or private
// copy-on-write (for received, sealed segments). Returns nullptr on failure
// with *error = errno. A zero size maps nothing and returns a non-null dummy.
void* MapSegment(int fd, size_t size, bool shared, int* error);
void UnmapSegment(void* address, size_t size);

}  // namespace procwire

#endif  // PROCWIRE_CORE_SHM_H_
