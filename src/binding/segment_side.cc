// SegmentSide: out-of-line sending and receiving and the recycled segment
// pools (see segment_side.h).
#include "native_channel_impl.h"

namespace procwire {

namespace {

// Calls visit(id) for each element of args[0], an array of segment ids
// (1..2^32-1). Returns false when args[0] is not an array, an element is not
// a valid id, or visit refused one; every valid id is still visited.
template <typename Visit>
bool ForEachSegmentId(const FunctionCallbackInfo<Value>& args, Visit visit) {
  if (!args[0]->IsArray()) return false;
  Local<Context> context = args.GetIsolate()->GetCurrentContext();
  Local<Array> list = args[0].As<Array>();
  bool ok = true;
  for (uint32_t i = 0; i < list->Length(); i++) {
    Local<Value> item;
    if (!list->Get(context, i).ToLocal(&item)) return false;
    const double id = item->IsNumber() ? item.As<Number>()->Value() : 0;
    if (!(id >= 1 && id <= 4294967295.0) || !visit(static_cast<uint32_t>(id))) ok = false;
  }
  return ok;
}

Local<Array> IdArray(Isolate* isolate, const std::vector<uint32_t>& ids) {
  Local<Context> context = isolate->GetCurrentContext();
  Local<Array> out = Array::New(isolate, static_cast<int>(ids.size()));
  for (size_t i = 0; i < ids.size(); i++) {
    out->Set(context, static_cast<uint32_t>(i), Integer::NewFromUnsigned(isolate, ids[i])).Check();
  }
  return out;
}

}  // namespace

// enableSegmentPool(maxBytes, maxCount): the peer takes recycled segments
// (it announced `pool`, so it also trusts future-write-sealed transfers):
// copies go into this channel's pool of pre-faulted segments.
void SegmentSide::EnableSegmentPool(const FunctionCallbackInfo<Value>& args) {
  if (!args[0]->IsNumber() || !args[1]->IsNumber() || send_pool_ != nullptr) return;
  const double max_bytes = args[0].As<Number>()->Value();
  const double max_count = args[1].As<Number>()->Value();
  if (!(max_bytes >= 0) || !(max_count >= 0)) return;
  const size_t bytes = max_bytes >= 9e15 ? SIZE_MAX : static_cast<size_t>(max_bytes);
  send_pool_.reset(new SegmentPool(size_t{64} << 10, bytes));
  send_pool_->SetLimits(bytes, max_count >= 9e15 ? SIZE_MAX : static_cast<size_t>(max_count));
  trusting_peer_ = true;
}

// acceptSegmentPool(maxMappedBytes): we announce `pool`: the peer may
// send recycled segments ([0xFC] control frames, at most maxMappedBytes
// of them mapped at once) and future-write-sealed transfers.
void SegmentSide::AcceptSegmentPool(const FunctionCallbackInfo<Value>& args) {
  if (received_pool_ != nullptr || !receiving_ || delegate_.closing() || !args[0]->IsNumber()) return;
  const double max_mapped = args[0].As<Number>()->Value();
  if (!(max_mapped >= 0)) return;
  delegate_.inbound().AcceptPooledSegments();
  received_pool_.reset(new ReceivedSegmentPool(
      delegate_.data()->isolate, delegate_.data()->loop,
      [this](std::vector<uint32_t>& ids) { OnSegmentsFree(ids); },
      max_mapped >= 9e15 ? SIZE_MAX : static_cast<size_t>(max_mapped)));
}

// recycleSegments(ids) -> false when an id was not in flight (a confused
// or hostile peer); the others are idle again.
void SegmentSide::RecycleSegments(const FunctionCallbackInfo<Value>& args) {
  bool ok = send_pool_ != nullptr;
  if (ok) ok = ForEachSegmentId(args, [this](uint32_t id) { return send_pool_->Recycle(id) >= 0; });
  args.GetReturnValue().Set(ok);
}

// takeDroppedSegments() -> ids the pool destroyed since the last call
// (the peer must be told to unmap them).
void SegmentSide::TakeDroppedSegments(const FunctionCallbackInfo<Value>& args) {
  std::vector<uint32_t> ids;
  if (send_pool_ != nullptr) ids = send_pool_->TakeDropped();
  args.GetReturnValue().Set(IdArray(args.GetIsolate(), ids));
}

// trimSegments() -> ids of every idle segment, now destroyed.
void SegmentSide::TrimSegments(const FunctionCallbackInfo<Value>& args) {
  std::vector<uint32_t> ids;
  if (send_pool_ != nullptr) {
    ids = send_pool_->TakeDropped();
    send_pool_->TrimIdle(&ids);
  }
  args.GetReturnValue().Set(IdArray(args.GetIsolate(), ids));
}

// forgetSegments(ids): the peer destroyed these; unknown ids are ignored.
void SegmentSide::ForgetSegments(const FunctionCallbackInfo<Value>& args) {
  if (received_pool_ == nullptr) return;
  // Unknown ids are ignored: a drop is only advice from the peer.
  ForEachSegmentId(args, [this](uint32_t id) {
    received_pool_->Forget(id);
    return true;
  });
}

// segmentPoolStats() -> [segments, bytes, in flight] of our pool, then
// [segments, bytes] of the peer's segments we map.
void SegmentSide::SegmentPoolStats(const FunctionCallbackInfo<Value>& args) {
  Isolate* isolate = args.GetIsolate();
  Local<Context> context = isolate->GetCurrentContext();
  const SegmentPool* p = send_pool_.get();
  const ReceivedSegmentPool* r = received_pool_.get();
  const double v[5] = {
      p ? static_cast<double>(p->segments()) : 0, p ? static_cast<double>(p->total_bytes()) : 0,
      p ? static_cast<double>(p->in_flight()) : 0, r ? static_cast<double>(r->segments()) : 0,
      r ? static_cast<double>(r->mapped_bytes()) : 0};
  Local<Array> out = Array::New(isolate, 5);
  for (int i = 0; i < 5; i++) out->Set(context, i, Number::New(isolate, v[i])).Check();
  args.GetReturnValue().Set(out);
}

// enableOutOfLine(): the peer said it takes segments; large views may go
// out of line from now on. (Until then everything goes inline, so a peer
// without shared-memory support, such as one on the JS fallback, is never
// sent a descriptor.)
void SegmentSide::EnableOutOfLine(const FunctionCallbackInfo<Value>& args) { sending_ = receiving_; }

void SegmentSide::CountSent(size_t bytes, size_t count) {
  Counters& c = delegate_.counters();
  c.ool_messages_out++;
  c.ool_bytes_out += static_cast<double>(bytes);
  if (shared_ != nullptr) {
    shared_[0] += static_cast<double>(bytes);
    shared_[1] += static_cast<double>(count);
  }
}

// Counters JavaScript reads without a call: [segment bytes sent, segments
// sent]. The array stays alive with the channel.
void SegmentSide::SetSharedCounters(Local<v8::Float64Array> shared) {
  shared_counters_.Reset(delegate_.data()->isolate, shared);
  shared_ = reinterpret_cast<double*>(static_cast<uint8_t*>(shared->Buffer()->Data()) + shared->ByteOffset());
}

// Maps the segments announced for a message (descriptors it owns, closed
// here): each is checked (memfd, sealed against writes, shrinking and
// growing) and mapped privately. Returns why they failed, or nullptr;
// after a failure the rest are only closed and segments is left empty.
const char* SegmentSide::MapSegments(Isolate* isolate, std::vector<int>* fds, InSegments* segments) {
  const char* bad = nullptr;
  size_t message_bytes = 0;
  for (int fd : *fds) {
    int error = 0;
    Local<ArrayBuffer> ab;
    taken_segments_++;
    // One message's segments together are held to maxMessageSize, as
    // its inline bytes are; each is checked before it is mapped.
    const size_t max = delegate_.max_payload_size();
    // A peer that takes recycled segments trusts ours, so it also takes
    // transfers sealed only against future writers.
    if (bad == nullptr &&
        MapReceivedSegment(isolate, fd, max - message_bytes, &error, received_pool_ != nullptr)
            .ToLocal(&ab)) {
      message_bytes += ab->ByteLength();
      delegate_.counters().ool_bytes_in += static_cast<double>(ab->ByteLength());
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
const char* SegmentSide::TakePooledSegments(Isolate* isolate, const std::vector<SegmentEntry>& entries,
                                            std::vector<int>* fds, InSegments* segments) {
  const char* bad = nullptr;
  const size_t max = delegate_.max_payload_size();
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
      delegate_.counters().ool_bytes_in += static_cast<double>(ab->ByteLength());
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
void SegmentSide::OnSegmentsFree(std::vector<uint32_t>& ids) {
  if (!delegate_.may_call() || on_return_.IsEmpty()) return;
  Isolate* isolate = delegate_.data()->isolate;
  HandleScope scope(isolate);
  Local<Context> context = delegate_.context();
  Context::Scope context_scope(context);
  Local<Value> argv[] = {IdArray(isolate, ids)};
  delegate_.Call(on_return_, 1, argv);
}

// Registers the methods of the segment side on the channel's template (as Node's
// StreamBase::AddMethods does for its streams).
// The methods are reachable after close (the object is gone): they do
// nothing then (ForwardIfOpen), except enableOutOfLine.
void SegmentSide::AddMethods(Isolate* isolate, Local<FunctionTemplate> t, Local<v8::External> external) {
  using S = SegmentSide;
  SetMethod(isolate, t, external, "enableOutOfLine",
            Forward<S, &NativeChannel::segments, &S::EnableOutOfLine>);
  SetMethod(isolate, t, external, "enableSegmentPool",
            ForwardIfOpen<S, &NativeChannel::segments, &S::EnableSegmentPool>);
  SetMethod(isolate, t, external, "acceptSegmentPool",
            ForwardIfOpen<S, &NativeChannel::segments, &S::AcceptSegmentPool>);
  SetMethod(isolate, t, external, "recycleSegments",
            ForwardIfOpen<S, &NativeChannel::segments, &S::RecycleSegments>);
  SetMethod(isolate, t, external, "takeDroppedSegments",
            ForwardIfOpen<S, &NativeChannel::segments, &S::TakeDroppedSegments>);
  SetMethod(isolate, t, external, "trimSegments",
            ForwardIfOpen<S, &NativeChannel::segments, &S::TrimSegments>);
  SetMethod(isolate, t, external, "forgetSegments",
            ForwardIfOpen<S, &NativeChannel::segments, &S::ForgetSegments>);
  SetMethod(isolate, t, external, "segmentPoolStats",
            ForwardIfOpen<S, &NativeChannel::segments, &S::SegmentPoolStats>);
}

}  // namespace procwire
