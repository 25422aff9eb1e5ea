#include "segments.h"

#include <node_buffer.h>

#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "../core/shm.h"
#include "../core/socket_io.h"

namespace procwire {

namespace {

struct AllocatedSegment {
  int fd;
  size_t size;
  bool unmap_now;
};

std::mutex g_registry_mutex;
std::unordered_map<const void*, AllocatedSegment>* g_registry = nullptr;

// One background thread unmaps big segments (allocated ones, and received
// ones once V8 frees them) and closes descriptors. Its state is never
// destroyed: the thread may still be waiting on it while the process exits.
struct Unmapper {
  std::mutex mutex;
  std::condition_variable wake;
  struct Job {
    void* data;
    size_t length;
    int fd;
  };
  std::deque<Job> jobs;
  // Bytes of mappings queued and not yet torn down.
  size_t queued_bytes = 0;
  bool started = false;
};
Unmapper* g_unmapper = new Unmapper();

// Past this many bytes queued, a caller tears its mapping down itself, so
// a thread that gets no CPU (below) cannot keep memory mapped without bound.
constexpr size_t kUnmapBacklogMax = size_t{1} << 30;

void UnmapperLoop() {
  // Tearing down a big mapping is cleanup (64 MiB of touched pages cost
  // about 3 ms of CPU, and 10 ms when the pages are freed with it), and on
  // a busy machine it must not take the CPU from the peer receiving the
  // message just sent, nor from this process's own loop. SCHED_IDLE runs
  // the thread only when nothing else wants the CPU; nice 19 alone was not
  // enough (a waking peer still waited behind it: 64 MiB transfers took
  // 2-4 ms in about one of three sends on this 2-core machine, 0.3-0.5 ms
  // otherwise).
  sched_param param{};
  if (sched_setscheduler(0, SCHED_IDLE, &param) != 0) {
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
  }
  for (;;) {
    Unmapper::Job job;
    {
      std::unique_lock<std::mutex> lock(g_unmapper->mutex);
      g_unmapper->wake.wait(lock, [] { return !g_unmapper->jobs.empty(); });
      job = g_unmapper->jobs.front();
      g_unmapper->jobs.pop_front();
    }
    UnmapSegment(job.data, job.length);
    CloseFd(job.fd);
    std::lock_guard<std::mutex> lock(g_unmapper->mutex);
    g_unmapper->queued_bytes -= job.length;
  }
}

void UnmapLater(void* data, size_t length, int fd) {
  {
    std::lock_guard<std::mutex> lock(g_unmapper->mutex);
    if (!g_unmapper->started) {
      try {
        std::thread(UnmapperLoop).detach();
        g_unmapper->started = true;
      } catch (...) {
        // No thread to be had: unmap here, as before.
      }
    }
    if (g_unmapper->started && length <= kUnmapBacklogMax &&
        g_unmapper->queued_bytes <= kUnmapBacklogMax - length) {
      g_unmapper->jobs.push_back(Unmapper::Job{data, length, fd});
      g_unmapper->queued_bytes += length;
      g_unmapper->wake.notify_one();
      return;
    }
  }
  UnmapSegment(data, length);
  CloseFd(fd);
}

// Smaller mappings are torn down at once: tens of microseconds.
constexpr size_t kUnmapLaterFrom = size_t{1} << 20;

void ForgetAndFree(void* data, size_t length, void* /*deleter_data*/) {
  int fd = -1;
  bool now = false;
  {
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    auto it = g_registry->find(data);
    if (it != g_registry->end()) {
      fd = it->second.fd;
      now = it->second.unmap_now;
      g_registry->erase(it);
    }
  }
  // The descriptor goes at once (cheap, and counted against the process's
  // limit); only large mappings, whose teardown costs real time, are left to
  // the background thread.
  CloseFd(fd);
  if (now || length < kUnmapLaterFrom) {
    UnmapSegment(data, length);
  } else {
    UnmapLater(data, length, -1);
  }
}

// V8 frees a received segment's memory (any thread; often one of its own
// workers, whose time the process's collector waits for). When this is the
// last mapping of the memfd its pages are freed with it, so a big one goes
// to the background thread too.
void UnmapReceived(void* data, size_t length, void* /*deleter_data*/) {
  if (length < kUnmapLaterFrom) {
    UnmapSegment(data, length);
  } else {
    UnmapLater(data, length, -1);
  }
}

}  // namespace

v8::MaybeLocal<v8::Object> AllocateSegmentBuffer(v8::Isolate* isolate, size_t size, int* error) {
  const int fd = CreateSegment(size);
  if (fd < 0) {
    *error = -fd;
    return {};
  }
  int map_error = 0;
  void* data = MapSegment(fd, size, /*shared=*/true, &map_error);
  if (data == nullptr) {
    CloseFd(fd);
    *error = map_error;
    return {};
  }
  if (size == 0) {
    // Nothing to share; a plain empty Buffer will do.
    CloseFd(fd);
    return node::Buffer::New(isolate, 0);
  }
  {
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    if (g_registry == nullptr) g_registry = new std::unordered_map<const void*, AllocatedSegment>();
    (*g_registry)[data] = AllocatedSegment{fd, size, false};
  }
  std::unique_ptr<v8::BackingStore> store =
      v8::ArrayBuffer::NewBackingStore(data, size, ForgetAndFree, nullptr);
  v8::Local<v8::ArrayBuffer> ab = v8::ArrayBuffer::New(isolate, std::move(store));
  v8::Local<v8::Uint8Array> buf;
  if (!node::Buffer::New(isolate, ab, 0, size).ToLocal(&buf)) return {};
  return buf;
}

int FindAllocatedSegment(const void* data, size_t* size) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  if (g_registry == nullptr) return -1;
  auto it = g_registry->find(data);
  if (it == g_registry->end()) return -1;
  *size = it->second.size;
  return it->second.fd;
}

void UnmapAllocatedNow(const void* data) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  if (g_registry == nullptr) return;
  auto it = g_registry->find(data);
  if (it != g_registry->end()) it->second.unmap_now = true;
}

v8::MaybeLocal<v8::ArrayBuffer> MapReceivedSegment(v8::Isolate* isolate, int fd, size_t max_size, int* error,
                                                   bool accept_future_write) {
  size_t size = 0;
  const int r = VerifySegment(fd, &size, accept_future_write);
  if (r < 0) {
    *error = -r;
    return {};
  }
  if (size > max_size) {
    // A sparse memfd costs the sender nothing; the receiver's limit holds
    // for segments as for inline frames.
    *error = EFBIG;
    return {};
  }
  void* data = MapSegment(fd, size, /*shared=*/false, error);
  if (data == nullptr) return {};
  std::unique_ptr<v8::BackingStore> store =
      size == 0 ? v8::ArrayBuffer::NewBackingStore(isolate, 0)
                : v8::ArrayBuffer::NewBackingStore(data, size, UnmapReceived, nullptr);
  return v8::ArrayBuffer::New(isolate, std::move(store));
}

size_t RefusedSegmentBytes(int fd) {
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < 0) return 0;
  return static_cast<size_t>(st.st_size);
}

// ---- a peer's recycled segments ----------------------------------------------

namespace {

void ReleaseMapping(ReceivedSegmentPool::Mapping* m) {
  if (m->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    munmap(m->data, m->size);
    delete m;
  }
}

// The memory of every ArrayBuffer lent over a recycled segment (a count:
// a hostile sender may name one segment twice), for release().
std::mutex g_leases_mutex;
std::unordered_map<const void*, int>* g_leases = new std::unordered_map<const void*, int>();

// What an ArrayBuffer over a recycled segment holds.
struct Lease {
  std::shared_ptr<ReceivedSegmentPool::Returns> returns;
  ReceivedSegmentPool::Mapping* mapping;
  uint32_t id;
};

// V8 frees the memory (any thread): hand the id back, then drop our share
// of the mapping. Once the pool is closed there is nobody to tell.
void ReturnLease(void* data, size_t /*length*/, void* deleter_data) {
  Lease* lease = static_cast<Lease*>(deleter_data);
  {
    std::lock_guard<std::mutex> lock(g_leases_mutex);
    auto it = g_leases->find(data);
    if (it != g_leases->end() && --it->second == 0) g_leases->erase(it);
  }
  {
    std::lock_guard<std::mutex> lock(lease->returns->mutex);
    if (lease->returns->async != nullptr) {
      lease->returns->ids.push_back(lease->id);
      uv_async_send(lease->returns->async);
    }
  }
  ReleaseMapping(lease->mapping);
  delete lease;
}

}  // namespace

bool ReleaseReceivedSegment(v8::Local<v8::ArrayBuffer> ab) {
  if (ab->WasDetached() || !ab->IsDetachable() || ab->ByteLength() == 0) return false;
  {
    std::lock_guard<std::mutex> lock(g_leases_mutex);
    if (g_leases->count(ab->Data()) == 0) return false;
  }
  // Detaching drops this ArrayBuffer's share of the memory; the deleter
  // (and so the return) runs once no other holder (a copy of the
  // ArrayBuffer transferred to a worker) is left.
  return ab->Detach(v8::Local<v8::Value>()).FromMaybe(false);
}

void LetCollectorCatchUp(v8::Isolate* isolate) {
  // One byte more than V8 counts, at once taken back: past V8's limit, the
  // growth makes it do the marking step it would otherwise do inside the
  // next ArrayBuffer::New of a big message. Nothing stays counted, and
  // the byte taken back barely moves V8's limit.
  isolate->AdjustAmountOfExternalAllocatedMemory(1);
  isolate->AdjustAmountOfExternalAllocatedMemory(-1);
}

ReceivedSegmentPool::ReceivedSegmentPool(v8::Isolate* isolate, uv_loop_t* loop, ReturnCallback on_return,
                                         size_t max_mapped)
    : isolate_(isolate),
      on_return_(std::move(on_return)),
      returns_(std::make_shared<Returns>()),
      max_mapped_(max_mapped) {
  uv_async_t* async = new uv_async_t;
  uv_async_init(loop, async, OnAsync);
  async->data = this;
  // The async must not keep the loop alive: returns matter only while the
  // channel itself does.
  uv_unref(reinterpret_cast<uv_handle_t*>(async));
  returns_->async = async;
}

ReceivedSegmentPool::~ReceivedSegmentPool() { Close(); }

void ReceivedSegmentPool::OnAsync(uv_async_t* handle) {
  ReceivedSegmentPool* self = static_cast<ReceivedSegmentPool*>(handle->data);
  if (self == nullptr) return;
  std::vector<uint32_t> ids;
  {
    std::lock_guard<std::mutex> lock(self->returns_->mutex);
    ids.swap(self->returns_->ids);
  }
  if (!ids.empty() && self->on_return_) self->on_return_(ids);
}

void ReceivedSegmentPool::Close() {
  uv_async_t* async = nullptr;
  {
    std::lock_guard<std::mutex> lock(returns_->mutex);
    async = returns_->async;
    returns_->async = nullptr;
    returns_->ids.clear();
  }
  if (async != nullptr) {
    async->data = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(async),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_async_t*>(h); });
  }
  for (auto& kv : maps_) ReleaseMapping(kv.second);
  maps_.clear();
  mapped_bytes_ = 0;
  on_return_ = nullptr;
}

int ReceivedSegmentPool::Add(uint32_t id, int fd, size_t max_size) {
  if (maps_.count(id) != 0) return -EEXIST;
  size_t size = 0;
  const int r = VerifyPooledSegment(fd, &size);
  if (r < 0) return r;
  if (size > max_size) return -EFBIG;
  if (size > max_mapped_ || mapped_bytes_ > max_mapped_ - size) return -ENOSPC;
  // Shared, so later messages in this segment are seen; populated now, so
  // reading a message costs no page faults.
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) return -errno;
  Mapping* m = new Mapping{static_cast<uint8_t*>(p), size, {1}};
  maps_.emplace(id, m);
  mapped_bytes_ += size;
  return 0;
}

v8::MaybeLocal<v8::ArrayBuffer> ReceivedSegmentPool::Take(uint32_t id, size_t length, int* error) {
  v8::Isolate* isolate = isolate_;
  auto it = maps_.find(id);
  if (it == maps_.end()) {
    *error = ENOENT;
    return {};
  }
  Mapping* m = it->second;
  if (length > m->size) {
    *error = EFBIG;
    return {};
  }
  if (length == 0) {
    // Nothing to read: the segment goes straight back.
    std::lock_guard<std::mutex> lock(returns_->mutex);
    if (returns_->async != nullptr) {
      returns_->ids.push_back(id);
      uv_async_send(returns_->async);
    }
    return v8::ArrayBuffer::New(isolate, 0);
  }
  m->refs.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(g_leases_mutex);
    (*g_leases)[m->data]++;
  }
  Lease* lease = new Lease{returns_, m, id};
  std::unique_ptr<v8::BackingStore> store =
      v8::ArrayBuffer::NewBackingStore(m->data, length, ReturnLease, lease);
  return v8::ArrayBuffer::New(isolate, std::move(store));
}

bool ReceivedSegmentPool::Forget(uint32_t id) {
  auto it = maps_.find(id);
  if (it == maps_.end()) return false;
  mapped_bytes_ -= it->second->size;
  ReleaseMapping(it->second);
  maps_.erase(it);
  return true;
}

}  // namespace procwire
