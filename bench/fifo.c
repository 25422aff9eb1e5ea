/* The pipe (FIFO) reference for procwire's latency suite, after Chromium's
 * Mach-vs-FIFO measurements: one-way latency of a message of N bytes written
 * into a pipe by one process and read whole by another.
 *
 *   fifo <budget_ms> <max_iters> <size> [<size> ...]
 *
 * For each size: the parent writes a 16-byte header (CLOCK_MONOTONIC send time
 * in ns, payload length) and the payload; the child reads it all, takes the
 * time, and answers with the 8-byte latency on a second pipe; the parent waits
 * for that answer before the next message (so nothing queues). Prints one line
 * per size: "<size> <count> <lat_ns> <lat_ns> ...". The first 3 messages of a
 * size are warm-up and not printed. Built by the bench with cc on demand.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int write_all(int fd, const void* buf, size_t len) {
  const char* p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static int read_all(int fd, void* buf, size_t len) {
  char* p = buf;
  while (len > 0) {
    ssize_t n = read(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (n == 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static void child_loop(int in, int out, size_t max_size) {
  char* buf = malloc(max_size ? max_size : 1);
  if (!buf) _exit(2);
  for (;;) {
    uint64_t hdr[2];
    if (read_all(in, hdr, sizeof hdr) < 0) _exit(0);
    if (hdr[1] > max_size) _exit(3);
    if (read_all(in, buf, (size_t)hdr[1]) < 0) _exit(0);
    uint64_t lat = now_ns() - hdr[0];
    if (write_all(out, &lat, sizeof lat) < 0) _exit(0);
  }
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s <budget_ms> <max_iters> <size>...\n", argv[0]);
    return 2;
  }
  double budget_ms = atof(argv[1]);
  long max_iters = atol(argv[2]);
  size_t max_size = 0;
  for (int i = 3; i < argc; i++) {
    size_t s = (size_t)strtoull(argv[i], NULL, 10);
    if (s > max_size) max_size = s;
  }
  int down[2], up[2];
  if (pipe(down) < 0 || pipe(up) < 0) {
    perror("pipe");
    return 1;
  }
  signal(SIGPIPE, SIG_IGN);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    return 1;
  }
  if (pid == 0) {
    close(down[1]);
    close(up[0]);
    child_loop(down[0], up[1], max_size);
  }
  close(down[0]);
  close(up[1]);
  char* payload = malloc(max_size ? max_size : 1);
  uint64_t* lats = malloc(sizeof(uint64_t) * (size_t)(max_iters + 3));
  if (!payload || !lats) return 1;
  memset(payload, '.', max_size);
  int rc = 0;
  for (int i = 3; i < argc && rc == 0; i++) {
    size_t size = (size_t)strtoull(argv[i], NULL, 10);
    uint64_t start = now_ns();
    long n = 0;
    for (long k = 0; k < max_iters + 3; k++) {
      uint64_t hdr[2] = {now_ns(), size};
      uint64_t lat;
      if (write_all(down[1], hdr, sizeof hdr) < 0 || write_all(down[1], payload, size) < 0 ||
          read_all(up[0], &lat, sizeof lat) < 0) {
        rc = 1;
        break;
      }
      if (k >= 3) lats[n++] = lat;
      if (n >= 5 && (double)(now_ns() - start) / 1e6 > budget_ms) break;
    }
    printf("%zu %ld", size, n);
    for (long k = 0; k < n; k++) printf(" %llu", (unsigned long long)lats[k]);
    printf("\n");
    fflush(stdout);
  }
  close(down[1]);
  close(up[0]);
  waitpid(pid, NULL, 0);
  return rc;
}
