// Transferred ArrayBuffers of an advanced frame: each handed over in a
// segment of its own before the encode, detached and sealed after it; and
// AbandonSegments, which gives back what an encode took for a frame that is
// not sent. Ownership: the descriptors made here go into the caller's
// OutOfLine (the caller closes or sends them); a recycled segment goes back
// to the channel's pool. Threading: the isolate's thread only.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "../core/shm.h"
#include "../core/socket_io.h"
#include "codec_impl.h"
#include "segments.h"

namespace procwire {

using v8::ArrayBuffer;
using v8::BackingStore;
using v8::Context;
using v8::Local;
using v8::Value;

// See codec_impl.h.
bool PrepareTransfers(AddonData* data, Local<Context> context, v8::ValueSerializer* serializer,
                      OutOfLine* ool) {
  if (!ool->enabled) return true;
  if (ool->transfer.size() > kMaxSegmentsPerFrame) {
    ThrowCodedError(data, context, "ERR_PROCWIRE_TRANSFER",
                    "too many buffers in one transfer list (at most 64)");
    return false;
  }
  for (size_t i = 0; i < ool->transfer.size(); i++) {
    Local<ArrayBuffer> ab = ool->transfer[i];
    size_t allocated = 0;
    const int owner = FindAllocatedSegment(ab->Data(), &allocated);
    int fd;
    if (owner >= 0 && allocated == ab->ByteLength()) {
      // Our own descriptor for the queue; the buffer's is closed when its
      // mapping goes.
      fd = fcntl(owner, F_DUPFD_CLOEXEC, 0);
    } else {
      fd = CreateSealedCopy(static_cast<const uint8_t*>(ab->Data()), ab->ByteLength());
    }
    if (fd < 0) {
      ThrowCodedError(data, context, "ERR_PROCWIRE_TRANSFER",
                      "could not make a segment for a transferred buffer");
      return false;
    }
    ool->fds.push_back(fd);
    ool->refs.push_back(SegmentRef{protocol::kSegmentSealed, 0, 0});
    ool->sources.emplace_back(data->isolate, ab);
    ool->segment_bytes += ab->ByteLength();
    serializer->TransferArrayBuffer(static_cast<uint32_t>(i), ab);
  }
  return true;
}

// See codec_impl.h.
bool FinishTransfers(AddonData* data, Local<Context> context, OutOfLine* ool) {
  for (size_t i = 0; i < ool->transfer.size(); i++) {
    Local<ArrayBuffer> ab = ool->transfer[i];
    std::shared_ptr<BackingStore> store = ab->GetBackingStore();
    if (ool->strict_transfer) UnmapAllocatedNow(store->Data());
    if (ab->IsDetachable()) {
      if (ab->Detach(Local<Value>()).IsNothing()) return false;
    }
    store.reset();
    if (ool->enabled && i < ool->fds.size()) {
      int r = SealTransferred(ool->fds[i], ool->strict_transfer);
      if (r == -EBUSY && ool->strict_transfer) {
        // No mapping is left, but the kernel may still hold a reference to
        // a page for a moment (a page another CPU has not yet put on its LRU
        // list, a migration): the bytes go in a sealed copy instead, which
        // costs one copy and keeps the guarantee.
        const int copy = SealedCopyOfSegment(ool->fds[i]);
        if (copy >= 0) {
          CloseFd(ool->fds[i]);
          ool->fds[i] = copy;
          r = 0;
        }
      }
      // EPERM: already sealed (a copy made above). EBUSY: the memory is still
      // mapped writable elsewhere (another holder of the backing store).
      if (r < 0 && r != -EPERM) {
        ThrowCodedError(data, context, "ERR_PROCWIRE_TRANSFER",
                        "a transferred buffer is still in use elsewhere and cannot be sealed");
        return false;
      }
    }
  }
  return true;
}

// See codec.h.
void AbandonSegments(OutOfLine* ool) {
  for (int fd : ool->fds) CloseFd(fd);
  ool->fds.clear();
  if (ool->pool != nullptr) {
    for (const SegmentRef& ref : ool->refs) {
      if (ref.kind == protocol::kSegmentPooledNew) ool->pool->Discard(ref.id);
      if (ref.kind == protocol::kSegmentPooled) ool->pool->Recycle(ref.id);
    }
  }
  ool->refs.clear();
  ool->any_pooled = false;
}

}  // namespace procwire
