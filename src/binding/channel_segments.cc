// NativeChannel's segment side: out-of-line sending and receiving and the
// recycled segment pool (src/binding/segments.h).
#include "native_channel_impl.h"

namespace procwire {

// enableSegmentPool(maxBytes, maxCount): the peer takes recycled segments
// (it announced `pool`, so it also trusts future-write-sealed transfers):
// copies go into this channel's pool of pre-faulted segments.
void NativeChannel::EnableSegmentPool(const FunctionCallbackInfo<Value>& args) {
  NativeChannel* self = Unwrap(args);
  // Reachable after close (the object is gone): nothing to do then.
  if (self == nullptr) return;
  if (!args[0]->IsNumber() || !args[1]->IsNumber() || self->send_pool_ != nullptr) return;
  const double max_bytes = args[0].As<Number>()->Value();
  const double max_count = args[1].As<Number>()->Value();
  if (!(max_bytes >= 0) || !(max_count >= 0)) return;
  const size_t bytes = max_bytes >= 9e15 ? SIZE_MAX : static_cast<size_t>(max_bytes);
  self->send_pool_.reset(new SegmentPool(size_t{64} << 10, bytes));
  self->send_pool_->SetLimits(bytes, max_count >= 9e15 ? SIZE_MAX : static_cast<size_t>(max_count));
  self->trusting_peer_ = true;
}

// acceptSegmentPool(maxMappedBytes): we announce `pool`: the peer may
// send recycled segments ([0xFC] control frames, at most maxMappedBytes
// of them mapped at once) and future-write-sealed transfers.
void NativeChannel::AcceptSegmentPool(const FunctionCallbackInfo<Value>& args) {
  NativeChannel* self = Unwrap(args);
  // Reachable after close (the object is gone): nothing to do then.
  if (self == nullptr) return;
  if (self->received_pool_ != nullptr || !self->ool_enabled_ || self->closing_ || !args[0]->IsNumber())
    return;
  const double max_mapped = args[0].As<Number>()->Value();
  if (!(max_mapped >= 0)) return;
  self->inbound_.AcceptPooledSegments();
  self->received_pool_.reset(new ReceivedSegmentPool(
      self->data_->isolate, self->data_->loop,
      [self](std::vector<uint32_t>& ids) { self->OnSegmentsFree(ids); },
      max_mapped >= 9e15 ? SIZE_MAX : static_cast<size_t>(max_mapped)));
}

// recycleSegments(ids) -> false when an id was not in flight (a confused
// or hostile peer); the others are idle again.
void NativeChannel::RecycleSegments(const FunctionCallbackInfo<Value>& args) {
  NativeChannel* self = Unwrap(args);
  // Reachable after close (the object is gone): nothing to do then.
  if (self == nullptr) return;
  bool ok = self->send_pool_ != nullptr;
  if (ok) ok = ForEachSegmentId(args, [self](uint32_t id) { return self->send_pool_->Recycle(id) >= 0; });
  args.GetReturnValue().Set(ok);
}

Local<Array> NativeChannel::IdArray(Isolate* isolate, const std::vector<uint32_t>& ids) {
  Local<Context> context = isolate->GetCurrentContext();
  Local<Array> out = Array::New(isolate, static_cast<int>(ids.size()));
  for (size_t i = 0; i < ids.size(); i++) {
    out->Set(context, static_cast<uint32_t>(i), Integer::NewFromUnsigned(isolate, ids[i])).Check();
  }
  return out;
}

// takeDroppedSegments() -> ids the pool destroyed since the last call
// (the peer must be told to unmap them).
void NativeChannel::TakeDroppedSegments(const FunctionCallbackInfo<Value>& args) {
  NativeChannel* self = Unwrap(args);
  // Reachable after close (the object is gone): nothing to do then.
  if (self == nullptr) return;
  std::vector<uint32_t> ids;
  if (self->send_pool_ != nullptr) ids = self->send_pool_->TakeDropped();
  args.GetReturnValue().Set(IdArray(args.GetIsolate(), ids));
}

// trimSegments() -> ids of every idle segment, now destroyed.
void NativeChannel::TrimSegments(const FunctionCallbackInfo<Value>& args) {
  NativeChannel* self = Unwrap(args);
  // Reachable after close (the object is gone): nothing to do then.
  if (self == nullptr) return;
  std::vector<uint32_t> ids;
  if (self->send_pool_ != nullptr) {
    ids = self->send_pool_->TakeDropped();
    self->send_pool_->TrimIdle(&ids);
  }
  args.GetReturnValue().Set(IdArray(args.GetIsolate(), ids));
}

// forgetSegments(ids): the peer destroyed these; unknown ids are ignored.
void NativeChannel::ForgetSegments(const FunctionCallbackInfo<Value>& args) {
  NativeChannel* self = Unwrap(args);
  // Reachable after close (the object is gone): nothing to do then.
  if (self == nullptr) return;
  if (self->received_pool_ == nullptr) return;
  // Unknown ids are ignored: a drop is only advice from the peer.
  ForEachSegmentId(args, [self](uint32_t id) {
    self->received_pool_->Forget(id);
    return true;
  });
}

// segmentPoolStats() -> [segments, bytes, in flight] of our pool, then
// [segments, bytes] of the peer's segments we map.
void NativeChannel::SegmentPoolStats(const FunctionCallbackInfo<Value>& args) {
  NativeChannel* self = Unwrap(args);
  // Reachable after close (the object is gone): nothing to do then.
  if (self == nullptr) return;
  Isolate* isolate = args.GetIsolate();
  Local<Context> context = isolate->GetCurrentContext();
  const SegmentPool* p = self->send_pool_.get();
  const ReceivedSegmentPool* r = self->received_pool_.get();
  const double v[5] = {
      p ? static_cast<double>(p->segments()) : 0, p ? static_cast<double>(p->total_bytes()) : 0,
      p ? static_cast<double>(p->in_flight()) : 0, r ? static_cast<double>(r->segments()) : 0,
      r ? static_cast<double>(r->mapped_bytes()) : 0};
  Local<Array> out = Array::New(isolate, 5);
  for (int i = 0; i < 5; i++) out->Set(context, i, Number::New(isolate, v[i])).Check();
  args.GetReturnValue().Set(out);
}

void NativeChannel::EnableOutOfLine(const FunctionCallbackInfo<Value>& args) {
  NativeChannel* self = Unwrap(args);
  CHECK_NOT_NULL(self);
  self->ool_send_ = self->ool_enabled_;
}

// Maps the segments announced for a message (descriptors it owns, closed
// here): each is checked (memfd, sealed against writes, shrinking and
// growing) and mapped privately. Returns why they failed, or nullptr;
// after a failure the rest are only closed and segments is left empty.
const char* NativeChannel::MapSegments(Isolate* isolate, std::vector<int>* fds, InSegments* segments) {
  const char* bad = nullptr;
  size_t message_bytes = 0;
  for (int fd : *fds) {
    int error = 0;
    Local<ArrayBuffer> ab;
    taken_segments_++;
    // One message's segments together are held to maxMessageSize, as
    // its inline bytes are; each is checked before it is mapped.
    const size_t max = reader_.max_payload_size();
    // A peer that takes recycled segments trusts ours, so it also takes
    // transfers sealed only against future writers.
    if (bad == nullptr &&
        MapReceivedSegment(isolate, fd, max - message_bytes, &error, received_pool_ != nullptr)
            .ToLocal(&ab)) {
      message_bytes += ab->ByteLength();
      counters_.ool_bytes_in += static_cast<double>(ab->ByteLength());
      taken_segment_bytes_ += static_cast<double>(ab->ByteLength());
      segments->buffers.push_back(ab);
    } else {
      // Acknowledged though refused (or skipped after a refusal), so the
      // sender's count of shared memory in flight still comes down.
      taken_segment_bytes_ += static_cast<double>(RefusedSegmentBytes(fd));
      if (bad == nullptr) {
        bad = error == EPERM
                  ? "a received segment is not a sealed memfd (write, shrink and grow seals required)"
              : error == EFBIG ? "a received segment is larger than maxMessageSize"
                               : "a received segment could not be mapped";
        segments->buffers.clear();
      }
    }
    CloseFd(fd);
  }
  fds->clear();
  return bad;
}

// The segments of a message announced by [0xFC] (docs/protocol.md): one
// entry each, some recycled; fds hold the descriptors of the sealed and
// new recycled ones, in entry order (owned here, closed here). Every
// recycled segment named is taken, even after an earlier entry failed, so
// that it goes back to the sender once unused. Returns why the message's
// segments failed, or nullptr.
const char* NativeChannel::TakePooledSegments(Isolate* isolate, const std::vector<SegmentEntry>& entries,
                                              std::vector<int>* fds, InSegments* segments) {
  const char* bad = nullptr;
  const size_t max = reader_.max_payload_size();
  size_t message_bytes = 0;
  size_t next_fd = 0;
  for (const SegmentEntry& e : entries) {
    int fd = -1;
    if (e.kind != protocol::kSegmentPooled && next_fd < fds->size()) fd = (*fds)[next_fd++];
    taken_segments_++;
    int error = 0;
    Local<ArrayBuffer> ab;
    bool ok;
    if (e.kind == protocol::kSegmentSealed) {
      ok = bad == nullptr && fd >= 0 &&
           MapReceivedSegment(isolate, fd, max - message_bytes, &error, /*accept_future_write=*/true)
               .ToLocal(&ab);
    } else {
      ok = received_pool_ != nullptr;
      if (ok && e.kind == protocol::kSegmentPooledNew) {
        // Segments come in power-of-two classes: one may be up to twice
        // the largest message it can hold.
        const size_t max_segment = max > SIZE_MAX / 2 ? SIZE_MAX : 2 * max;
        const int r = e.id == 0 || fd < 0 ? -EINVAL : received_pool_->Add(e.id, fd, max_segment);
        if (r < 0) {
          ok = false;
          error = -r;
        }
      }
      if (ok) ok = received_pool_->Take(e.id, e.length, &error).ToLocal(&ab);
      if (ok && (bad != nullptr || e.length > max - message_bytes)) {
        // Taken only to be handed back once collected.
        if (bad == nullptr) error = EFBIG;
        ok = false;
      }
    }
    if (!ok) {
      // Acknowledged though refused, as in MapSegments: a sealed segment
      // by its size, a recycled one by the length the sender counted.
      taken_segment_bytes_ +=
          static_cast<double>(e.kind == protocol::kSegmentSealed ? RefusedSegmentBytes(fd) : e.length);
    }
    if (fd >= 0) CloseFd(fd);
    if (ok) {
      message_bytes += ab->ByteLength();
      counters_.ool_bytes_in += static_cast<double>(ab->ByteLength());
      taken_segment_bytes_ += static_cast<double>(ab->ByteLength());
      segments->buffers.push_back(ab);
    } else if (bad == nullptr) {
      bad = error == EPERM    ? "a received segment is not a memfd with the required seals"
            : error == EFBIG  ? "a received segment is larger than maxMessageSize"
            : error == EEXIST ? "a new recycled segment reuses an id already mapped"
            : error == ENOENT ? "a recycled segment id that was never announced"
            : error == EINVAL ? "a recycled segment with id 0"
            : error == ENOSPC ? "the peer's recycled segments exceed what this end maps at once"
                              : "a received segment could not be mapped";
      segments->buffers.clear();
    }
  }
  for (size_t i = next_fd; i < fds->size(); i++) CloseFd((*fds)[i]);
  fds->clear();
  return bad;
}

// Recycled segments whose ArrayBuffers V8 freed: JavaScript hands them
// back to the peer. Runs from the pool's async handle, on the loop.
void NativeChannel::OnSegmentsFree(std::vector<uint32_t>& ids) {
  if (closing_ || ended() || teardown_ || on_segment_return_.IsEmpty()) return;
  Isolate* isolate = data_->isolate;
  HandleScope scope(isolate);
  Local<Context> context = context_.Get(isolate);
  Context::Scope context_scope(context);
  Local<Value> argv[] = {IdArray(isolate, ids)};
  Call(on_segment_return_, 1, argv);
}

// Registers the methods of the segment side on the channel's template (as Node's
// StreamBase::AddMethods does for its streams).
void NativeChannel::AddSegmentMethods(Isolate* isolate, Local<FunctionTemplate> ch,
                                      Local<v8::External> external) {
  SetMethod(isolate, ch, external, "enableOutOfLine", EnableOutOfLine);
  SetMethod(isolate, ch, external, "enableSegmentPool", EnableSegmentPool);
  SetMethod(isolate, ch, external, "acceptSegmentPool", AcceptSegmentPool);
  SetMethod(isolate, ch, external, "recycleSegments", RecycleSegments);
  SetMethod(isolate, ch, external, "takeDroppedSegments", TakeDroppedSegments);
  SetMethod(isolate, ch, external, "trimSegments", TrimSegments);
  SetMethod(isolate, ch, external, "forgetSegments", ForgetSegments);
  SetMethod(isolate, ch, external, "segmentPoolStats", SegmentPoolStats);
}

}  // namespace procwire
