#include "segments.h"

#include <node_buffer.h>

#include <cerrno>
#include <mutex>
#include <unordered_map>

#include "../core/shm.h"
#include "../core/socket_io.h"

namespace procwire {

namespace {

struct AllocatedSegment {
  int fd;
  size_t size;
};

std::mutex g_registry_mutex;
std::unordered_map<const void*, AllocatedSegment>* g_registry = nullptr;

void ForgetAndFree(void* data, size_t length, void* /*deleter_data*/) {
  int fd = -1;
  {
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    auto it = g_registry->find(data);
    if (it != g_registry->end()) {
      fd = it->second.fd;
      g_registry->erase(it);
    }
  }
  UnmapSegment(data, length);
  CloseFd(fd);
}

void UnmapReceived(void* data, size_t length, void* /*deleter_data*/) { UnmapSegment(data, length); }

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
    (*g_registry)[data] = AllocatedSegment{fd, size};
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

v8::MaybeLocal<v8::ArrayBuffer> MapReceivedSegment(v8::Isolate* isolate, int fd, size_t max_size,
                                                   int* error) {
  size_t size = 0;
  const int r = VerifySegment(fd, &size);
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

}  // namespace procwire
