// Shared-memory segments as seen from JavaScript: Buffers made by
// procwire.alloc() (backed by a shared mapping of a memfd, so a transfer can
// hand over the memfd instead of copying), and ArrayBuffers over received,
// sealed segments (private copy-on-write mappings).
//
// Ownership: each mapping belongs to its V8 BackingStore; the deleter unmaps
// it (and closes an allocated segment's descriptor). Deleters may run on any
// thread (V8 frees backing stores from its sweeper), so the registry of
// allocated segments is guarded by a mutex.
#ifndef PROCWIRE_BINDING_SEGMENTS_H_
#define PROCWIRE_BINDING_SEGMENTS_H_

#include <v8.h>

#include <cstddef>

namespace procwire {

// A Buffer of `size` bytes over a fresh memfd. Returns an empty handle with a
// coded error pending on failure.
v8::MaybeLocal<v8::Object> AllocateSegmentBuffer(v8::Isolate* isolate, size_t size, int* error);

// The memfd behind an allocated ArrayBuffer's memory, or -1.
int FindAllocatedSegment(const void* data, size_t* size);

// An ArrayBuffer over a received segment: checks its seals, maps it
// privately (the caller still closes fd; the mapping keeps the memory).
// Returns an empty handle and *error (EPERM: seals missing; EFBIG: larger
// than max_size, checked before anything is mapped) on failure.
v8::MaybeLocal<v8::ArrayBuffer> MapReceivedSegment(v8::Isolate* isolate, int fd, size_t max_size, int* error);

}  // namespace procwire

#endif  // PROCWIRE_BINDING_SEGMENTS_H_
