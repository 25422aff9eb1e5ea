/* The shared-memory reference for procwire's round-trip suite: what two
 * processes on this machine can do with nothing but C, over
 *   socketpair  an AF_UNIX stream pair, frames batched into large reads and
 *               writes (the best a socket transport can hope for), or
 *   ring        one single-producer/single-consumer ring per direction in a
 *               shared memfd, eventfd wake-ups only when the reader announced
 *               it is going to sleep, after a bounded adaptive spin (the
 *               protocol of src/core/ring.h, restated in C so this file
 *               builds alone with cc).
 *
 *   ring <socketpair|ring> <pin 0|1> <warm_ms> <window_ms> <lat_ms> <size>...
 *
 * For each size: a fresh child echoes frames (u32 big-endian length, then
 * `size` bytes, as procwire's advanced wire format); the parent keeps 256
 * frames in flight for warm_ms, then counts echoed frames for window_ms, then
 * sends one frame at a time for lat_ms and times each round trip. With pin 1
 * both processes run on one CPU. Prints one line per size:
 *   "<size> <round trips/s> <p50 ns> <p99 ns> <latency samples>"
 * Built by the bench with cc on demand (bench/lib/fifo.js).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define IN_FLIGHT 256
#define HDR_PAGE 4096
#define REC_HDR 8
#define KIND_DATA 0x44415441u
#define KIND_WRAP 0x57524150u
#define SPIN_MIN 16u
#define SPIN_MAX 16384u

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char* what) {
  perror(what);
  exit(1);
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield" ::: "memory");
#endif
}

/* ---- the ring ------------------------------------------------------------ */

struct ring_hdr {
  uint64_t magic;
  uint64_t capacity;
  _Alignas(64) _Atomic uint64_t head;
  _Alignas(64) _Atomic uint64_t tail;
  _Alignas(64) _Atomic uint32_t consumer_sleeping;
};

struct ring {
  struct ring_hdr* h;
  uint8_t* data;
  uint64_t cap;
  uint64_t pos;   /* writer: head; reader: tail (private copies) */
  uint64_t other; /* the last value read of the other side's index */
  int efd;        /* signalled to wake this ring's reader */
};

static size_t rec_space(size_t n) { return REC_HDR + ((n + 7) & ~(size_t)7); }

static void ring_create(struct ring* r, uint64_t cap) {
  int fd = (int)syscall(SYS_memfd_create, "ring-bench", 1u /* MFD_CLOEXEC */);
  if (fd < 0) die("memfd_create");
  if (ftruncate(fd, (off_t)(HDR_PAGE + cap)) < 0) die("ftruncate");
  void* p = mmap(NULL, HDR_PAGE + cap, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) die("mmap");
  close(fd);
  memset(r, 0, sizeof *r);
  r->h = p;
  r->data = (uint8_t*)p + HDR_PAGE;
  r->cap = cap;
  r->h->capacity = cap;
  r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (r->efd < 0) die("eventfd");
}

/* Writes one record; returns 0, or -1 when it does not fit now. The bench
 * sizes its rings so that the in-flight window always fits. */
static int ring_write(struct ring* r, const uint8_t* a, size_t an, const uint8_t* b, size_t bn) {
  size_t n = an + bn, need = rec_space(n);
  size_t off = (size_t)(r->pos & (r->cap - 1)), contig = (size_t)r->cap - off;
  if (need > contig) {
    if (r->cap - (r->pos - r->other) < contig)
      r->other = atomic_load_explicit(&r->h->tail, memory_order_acquire);
    if (r->cap - (r->pos - r->other) < contig) return -1;
    uint32_t w[2] = {(uint32_t)(contig - REC_HDR), KIND_WRAP};
    memcpy(r->data + off, w, 8);
    r->pos += contig;
    atomic_store_explicit(&r->h->head, r->pos, memory_order_release);
    off = 0;
  }
  if (r->cap - (r->pos - r->other) < need) r->other = atomic_load_explicit(&r->h->tail, memory_order_acquire);
  if (r->cap - (r->pos - r->other) < need) return -1;
  memcpy(r->data + off + REC_HDR, a, an);
  if (bn) memcpy(r->data + off + REC_HDR + an, b, bn);
  uint32_t w[2] = {(uint32_t)n, KIND_DATA};
  memcpy(r->data + off, w, 8);
  r->pos += need;
  atomic_store_explicit(&r->h->head, r->pos, memory_order_release);
  return 0;
}

/* After a batch of writes: signal the reader if it announced sleep. */
static void ring_wake_reader(struct ring* r) {
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&r->h->consumer_sleeping, memory_order_relaxed) &&
      atomic_exchange(&r->h->consumer_sleeping, 0)) {
    uint64_t one = 1;
    if (write(r->efd, &one, 8) < 0 && errno != EAGAIN) die("eventfd write");
  }
}

/* The next record, or NULL when empty. The indices are validated as in
 * src/core/ring.cc; a bad one aborts the bench. */
static const uint8_t* ring_peek(struct ring* r, size_t* n, size_t* space) {
  for (int step = 0; step < 2; step++) {
    if (r->other == r->pos) {
      r->other = atomic_load_explicit(&r->h->head, memory_order_acquire);
      if (r->other == r->pos) return NULL;
      if (r->other - r->pos > r->cap) {
        fprintf(stderr, "bad head\n");
        exit(1);
      }
    }
    size_t off = (size_t)(r->pos & (r->cap - 1)), contig = (size_t)r->cap - off;
    uint32_t w[2];
    memcpy(w, r->data + off, 8);
    if (w[1] == KIND_WRAP) {
      r->pos += contig;
      atomic_store_explicit(&r->h->tail, r->pos, memory_order_release);
      continue;
    }
    if (w[1] != KIND_DATA || rec_space(w[0]) > contig || rec_space(w[0]) > r->other - r->pos) {
      fprintf(stderr, "bad record\n");
      exit(1);
    }
    *n = w[0];
    *space = rec_space(w[0]);
    return r->data + off + REC_HDR;
  }
  fprintf(stderr, "bad wrap\n");
  exit(1);
}

static void ring_consume(struct ring* r, size_t space) {
  r->pos += space;
  atomic_store_explicit(&r->h->tail, r->pos, memory_order_release);
}

/* Waits until the ring has a record: spins within an adaptive budget, then
 * announces sleep, re-checks, and sleeps on the eventfd. */
static void ring_wait(struct ring* r, uint32_t* budget) {
  size_t n, s;
  for (uint32_t i = 0; i < *budget; i++) {
    cpu_relax();
    if (ring_peek(r, &n, &s)) {
      *budget = *budget >= SPIN_MAX / 2 ? SPIN_MAX : *budget * 2;
      return;
    }
  }
  *budget = *budget <= SPIN_MIN * 2 ? SPIN_MIN : *budget / 2;
  atomic_store_explicit(&r->h->consumer_sleeping, 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_seq_cst);
  if (ring_peek(r, &n, &s)) {
    atomic_store_explicit(&r->h->consumer_sleeping, 0, memory_order_relaxed);
    return;
  }
  struct pollfd p = {r->efd, POLLIN, 0};
  while (poll(&p, 1, -1) < 0 && errno == EINTR) {
  }
  uint64_t v;
  if (read(r->efd, &v, 8) < 0 && errno != EAGAIN) die("eventfd read");
  atomic_store_explicit(&r->h->consumer_sleeping, 0, memory_order_relaxed);
}

/* ---- socketpair helpers ------------------------------------------------- */

static void write_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        struct pollfd q = {fd, POLLOUT, 0};
        poll(&q, 1, -1);
        continue;
      }
      die("write");
    }
    p += w;
    n -= (size_t)w;
  }
}

static uint32_t be32(const uint8_t* p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Counts whole frames in buf[0, *len) and keeps the partial tail at the start. */
static size_t count_frames(uint8_t* buf, size_t* len) {
  size_t pos = 0, frames = 0;
  while (*len - pos >= 4) {
    size_t f = 4 + (size_t)be32(buf + pos);
    if (*len - pos < f) break;
    pos += f;
    frames++;
  }
  memmove(buf, buf + pos, *len - pos);
  *len -= pos;
  return frames;
}

/* ---- the two roles --------------------------------------------------------- */

struct transport {
  int ring;
  int sock;             /* socketpair: this side's end */
  struct ring down, up; /* ring: parent -> child, child -> parent */
  uint8_t* buf;
  size_t buf_size, buf_len;
};

static void child_echo(struct transport* t) {
  if (!t->ring) {
    uint8_t* out = malloc(t->buf_size);
    for (;;) {
      ssize_t n = read(t->sock, t->buf + t->buf_len, t->buf_size - t->buf_len);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) _exit(0);
      t->buf_len += (size_t)n;
      /* Echo each whole frame (copied, as a real peer would build its
       * reply), all of them in one write. */
      size_t pos = 0, olen = 0;
      while (t->buf_len - pos >= 4) {
        size_t f = 4 + (size_t)be32(t->buf + pos);
        if (t->buf_len - pos < f) break;
        memcpy(out + olen, t->buf + pos, f);
        olen += f;
        pos += f;
      }
      memmove(t->buf, t->buf + pos, t->buf_len - pos);
      t->buf_len -= pos;
      write_all(t->sock, out, olen);
    }
  }
  uint32_t budget = 1024;
  for (;;) {
    size_t n, space;
    const uint8_t* p = ring_peek(&t->down, &n, &space);
    if (!p) {
      if (getppid() == 1) _exit(0);
      ring_wait(&t->down, &budget);
      continue;
    }
    while (p) {
      if (ring_write(&t->up, p, n, NULL, 0) < 0) {
        fprintf(stderr, "up ring full\n");
        _exit(3);
      }
      ring_consume(&t->down, space);
      p = ring_peek(&t->down, &n, &space);
    }
    ring_wake_reader(&t->up);
  }
}

/* Sends one frame of `size` bytes. */
static void send_frame(struct transport* t, const uint8_t* payload, size_t size, uint8_t* out, size_t* olen) {
  uint8_t h[4] = {(uint8_t)(size >> 24), (uint8_t)(size >> 16), (uint8_t)(size >> 8), (uint8_t)size};
  if (t->ring) {
    if (ring_write(&t->down, h, 4, payload, size) < 0) {
      fprintf(stderr, "down ring full\n");
      exit(3);
    }
    return;
  }
  memcpy(out + *olen, h, 4);
  memcpy(out + *olen + 4, payload, size);
  *olen += 4 + size;
}

/* Frames echoed while the parent was still writing, not yet reported. */
static size_t early_frames;

static void flush(struct transport* t, uint8_t* out, size_t* olen) {
  if (t->ring) {
    ring_wake_reader(&t->down);
    return;
  }
  /* The parent's end is non-blocking: when the socket is full it reads the
   * echoes that fill the other direction, or both sides would block. */
  size_t pos = 0;
  while (pos < *olen) {
    ssize_t w = write(t->sock, out + pos, *olen - pos);
    if (w > 0) {
      pos += (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno != EAGAIN) die("write");
    struct pollfd q = {t->sock, POLLIN | POLLOUT, 0};
    if (poll(&q, 1, -1) < 0 && errno != EINTR) die("poll");
    if (q.revents & POLLIN) {
      ssize_t n = read(t->sock, t->buf + t->buf_len, t->buf_size - t->buf_len);
      if (n == 0) die("peer closed");
      if (n > 0) {
        t->buf_len += (size_t)n;
        early_frames += count_frames(t->buf, &t->buf_len);
      }
    }
  }
  *olen = 0;
}

/* Waits for at least one echoed frame; returns how many arrived. */
static size_t receive_frames(struct transport* t, uint32_t* budget) {
  if (t->ring) {
    for (;;) {
      size_t n, space, got = 0;
      const uint8_t* p;
      while ((p = ring_peek(&t->up, &n, &space)) != NULL) {
        (void)p;
        ring_consume(&t->up, space);
        got++;
      }
      if (got) return got;
      ring_wait(&t->up, budget);
    }
  }
  if (early_frames) {
    size_t got = early_frames;
    early_frames = 0;
    return got;
  }
  for (;;) {
    ssize_t n = read(t->sock, t->buf + t->buf_len, t->buf_size - t->buf_len);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
      struct pollfd q = {t->sock, POLLIN, 0};
      poll(&q, 1, -1);
      continue;
    }
    if (n <= 0) die("read");
    t->buf_len += (size_t)n;
    size_t got = count_frames(t->buf, &t->buf_len);
    if (got) return got;
  }
}

static int cmp_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

static void pin_to_one_cpu(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) < 0) die("sched_getaffinity");
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (CPU_ISSET(c, &set)) {
      CPU_ZERO(&set);
      CPU_SET(c, &set);
      if (sched_setaffinity(0, sizeof set, &set) < 0) die("sched_setaffinity");
      return;
    }
  }
}

static void measure(int use_ring, int pin, double warm_ms, double window_ms, double lat_ms, size_t size) {
  struct transport t;
  memset(&t, 0, sizeof t);
  t.ring = use_ring;
  /* Room for a full window of frames at any moment, with slack. */
  t.buf_size = 2 * IN_FLIGHT * (size + 4) + 65536;
  t.buf = malloc(t.buf_size);
  uint8_t* out = malloc(t.buf_size);
  uint8_t* payload = malloc(size ? size : 1);
  if (!t.buf || !out || !payload) die("malloc");
  memset(payload, '.', size);
  int sv[2] = {-1, -1};
  if (use_ring) {
    uint64_t cap = 4096;
    while (cap < 2 * IN_FLIGHT * rec_space(size + 4)) cap <<= 1;
    ring_create(&t.down, cap);
    ring_create(&t.up, cap);
  } else if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
    die("socketpair");
  }
  if (pin) pin_to_one_cpu();
  pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    /* A child blocked in poll must not outlive a parent that died. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (!use_ring) {
      close(sv[0]);
      t.sock = sv[1];
    }
    child_echo(&t);
    _exit(0);
  }
  if (!use_ring) {
    close(sv[1]);
    t.sock = sv[0];
    if (fcntl(t.sock, F_SETFL, O_NONBLOCK) < 0) die("fcntl");
  }
  uint32_t budget = 1024;
  size_t olen = 0;
  /* Pipelined: keep IN_FLIGHT frames outstanding. */
  size_t inflight = 0;
  uint64_t start = now_ns(), counted = 0, t0 = 0;
  int counting = 0;
  for (;;) {
    while (inflight < IN_FLIGHT) {
      send_frame(&t, payload, size, out, &olen);
      inflight++;
    }
    flush(&t, out, &olen);
    size_t got = receive_frames(&t, &budget);
    inflight -= got;
    uint64_t now = now_ns();
    if (!counting && (double)(now - start) / 1e6 >= warm_ms) {
      counting = 1;
      t0 = now;
    } else if (counting) {
      counted += got;
      if ((double)(now - t0) / 1e6 >= window_ms) break;
    }
  }
  double rps = (double)counted / ((double)(now_ns() - t0) / 1e9);
  while (inflight > 0) inflight -= receive_frames(&t, &budget);
  /* Sequential: one frame at a time. */
  size_t cap_samples = 1 << 20, n = 0;
  uint64_t* lat = malloc(sizeof(uint64_t) * cap_samples);
  start = now_ns();
  while (n < cap_samples && (n < 5 || (double)(now_ns() - start) / 1e6 < lat_ms)) {
    uint64_t s = now_ns();
    send_frame(&t, payload, size, out, &olen);
    flush(&t, out, &olen);
    receive_frames(&t, &budget);
    lat[n++] = now_ns() - s;
  }
  qsort(lat, n, sizeof lat[0], cmp_u64);
  printf("%zu %.0f %llu %llu %zu\n", size, rps, (unsigned long long)lat[n / 2],
         (unsigned long long)lat[n * 99 / 100], n);
  fflush(stdout);
  if (use_ring) {
    kill(pid, SIGKILL);
  } else {
    close(t.sock);
  }
  waitpid(pid, NULL, 0);
  if (use_ring) {
    munmap(t.down.h, HDR_PAGE + t.down.cap);
    munmap(t.up.h, HDR_PAGE + t.up.cap);
    close(t.down.efd);
    close(t.up.efd);
  }
  free(lat);
  free(t.buf);
  free(out);
  free(payload);
}

int main(int argc, char** argv) {
  if (argc < 7) {
    fprintf(stderr, "usage: %s <socketpair|ring> <pin 0|1> <warm_ms> <window_ms> <lat_ms> <size>...\n",
            argv[0]);
    return 2;
  }
  int use_ring;
  if (strcmp(argv[1], "ring") == 0)
    use_ring = 1;
  else if (strcmp(argv[1], "socketpair") == 0)
    use_ring = 0;
  else {
    fprintf(stderr, "unknown transport %s\n", argv[1]);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  int pin = atoi(argv[2]);
  double warm = atof(argv[3]), window = atof(argv[4]), lat = atof(argv[5]);
  for (int i = 6; i < argc; i++)
    measure(use_ring, pin, warm, window, lat, (size_t)strtoull(argv[i], NULL, 10));
  return 0;
}
