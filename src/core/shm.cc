#include "shm.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "socket_io.h"

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif

namespace procwire {

namespace {

// A page-aligned stand-in address for zero-length mappings, which mmap
// refuses; it is never dereferenced.
alignas(64) uint8_t g_empty_segment[64];

int MakeMemfd() {
  // Through syscall(2) so older C libraries without memfd_create() build too.
  const int fd = static_cast<int>(syscall(SYS_memfd_create, "procwire", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  return fd < 0 ? -errno : fd;
}

}  // namespace

int RequiredSeals() { return F_SEAL_SEAL | F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW; }

int CreateSegment(size_t size) {
  const int fd = MakeMemfd();
  if (fd < 0) return fd;
  if (ftruncate(fd, static_cast<off_t>(size)) < 0) {
    const int err = errno;
    CloseFd(fd);
    return -err;
  }
  return fd;
}

int CreateSealedCopy(const uint8_t* data, size_t size) {
  const int fd = CreateSegment(size);
  if (fd < 0) return fd;
  // write(2) copies straight into the segment's pages: no mapping is needed,
  // so the write seal can be set at once afterwards.
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      CloseFd(fd);
      return -err;
    }
    done += static_cast<size_t>(n);
  }
  const int r = SealSegment(fd);
  if (r < 0) {
    CloseFd(fd);
    return r;
  }
  return fd;
}

int SealSegment(int fd) {
  if (fcntl(fd, F_ADD_SEALS, RequiredSeals()) < 0) return -errno;
  return 0;
}

int VerifySegment(int fd, size_t* size) {
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0) return errno == EINVAL ? -EPERM : -errno;  // not a memfd
  if ((seals & RequiredSeals()) != RequiredSeals()) return -EPERM;
  struct stat st;
  if (fstat(fd, &st) < 0) return -errno;
  if (!S_ISREG(st.st_mode) || st.st_size < 0) return -EPERM;
  *size = static_cast<size_t>(st.st_size);
  return 0;
}

void* MapSegment(int fd, size_t size, bool shared, int* error) {
  if (size == 0) return g_empty_segment;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, shared ? MAP_SHARED : MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) {
    *error = errno;
    return nullptr;
  }
  return p;
}

void UnmapSegment(void* address, size_t size) {
  if (size == 0 || address == g_empty_segment) return;
  munmap(address, size);
}

}  // namespace procwire
