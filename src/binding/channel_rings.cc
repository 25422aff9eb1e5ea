// NativeChannel's ring side: set-up frames, ring reads merged with the
// socket by their marks, and the wake-up link (src/core/ring_link.h).
#include "native_channel_impl.h"

namespace procwire {

// allowRings([answer]): the peer may set up a ring towards us (a ring
// set-up control frame is accepted). Called by channels that announce
// `rings`; on channels that run the hello, only once it is done. With
// answer (the server of such a channel), our own ring is set up as soon as
// the peer's is attached, in answer to it.
void NativeChannel::AllowRings(const FunctionCallbackInfo<Value>& args) {
  NativeChannel* self = Unwrap(args);
  CHECK_NOT_NULL(self);
  self->inbound_.AcceptRings();
  self->rings_answer_ = args.Length() > 0 && args[0]->IsTrue();
}

// enableRings() -> total bytes ever queued: the peer announced `rings`;
// creates our outbound ring and queues its set-up frame (with the memfd
// and the signalling end of our wake-up link) on the socket. Frames may
// take the ring from now on; the peer reads them once it has read the
// set-up frame, which comes first (see the socket marks in
// ring_link.h), and is woken once its own set-up brought its link. If the ring cannot be made,
// nothing is announced and everything keeps going by the socket.
void NativeChannel::EnableRings(const FunctionCallbackInfo<Value>& args) {
  NativeChannel* self = Unwrap(args);
  CHECK_NOT_NULL(self);
  self->QueueRingSetup();
  args.GetReturnValue().Set(self->TotalPushed());
}

// Creates our outbound ring and queues its set-up frame. False when the
// ring already exists, the channel is ending or the ring cannot be made.
bool NativeChannel::QueueRingSetup() {
  if (ring_out_ready_ || ended() || closing_) return false;
  if (rings_ == nullptr) rings_.reset(new RingLink());
  int ring_fd = -1;
  int wake_fd = -1;
  if (rings_->CreateOutbound(kChannelRingCapacity) != 0 || rings_->DupSetupFds(&ring_fd, &wake_fd) != 0) {
    return false;
  }
  uint8_t* control = static_cast<uint8_t*>(std::malloc(kRingSetupFrameMax));
  CHECK_NOT_NULL(control);
  const size_t size = EncodeRingSetupFrame(reader_.format(), control);
  queue_.Push(OutChunk{control, size, FreeBlock, nullptr, {ring_fd, wake_fd}});
  ring_out_ready_ = true;
  return true;
}

// The peer moved the read index of our ring to an impossible place. The
// frame at hand (and any after it) goes by the socket, so nothing is
// lost or reordered, and the channel is closed with
// ERR_PROCWIRE_RING_CORRUPT from the ring's poll handle, outside this send.
void NativeChannel::OutboundRingFailed() {
  if (rings_->corrupt_reason() != nullptr) return;
  rings_->SetCorrupt("the peer moved the read index of our ring to an impossible place");
  if (ring_poll_started_) rings_->WakeSelf();
}

void NativeChannel::EndRingCorrupt(Local<Context> context) {
  Local<Value> err;
  char message[200];
  std::snprintf(message, sizeof(message),
                "the shared-memory ring from the peer is corrupt: %s; the channel was closed",
                rings_->corrupt_reason());
  if (!MakeCodedError(data_, context, "ERR_PROCWIRE_RING_CORRUPT", message).ToLocal(&err)) return;
  End(EndReason::kRingCorrupt, err);
}

// A socket frame starting at socket offset X comes after every ring record
// marked <= X (see ring_link.h).
void NativeChannel::DeliverSocketFrame(Local<Context> context, ReadBlock* block,
                                       const FrameReader::Frame& frame, std::vector<Local<Value>>* messages,
                                       std::vector<Local<Value>>* errors,
                                       std::vector<Local<Value>>* handle_fds, v8::TryCatch* try_catch) {
  const uint64_t start = socket_framed_;
  last_socket_frame_size_ = frame.size;
  socket_framed_ += frame.size + (reader_.format() == WireFormat::kAdvanced ? kAdvancedHeaderSize : 1);
  if (rings_ != nullptr && rings_->has_inbound())
    DrainRing(context, messages, errors, handle_fds, try_catch, start);
  DeliverFrame(context, block, frame, Inbound::Source::kSocket, messages, errors, handle_fds, try_catch);
}

// A ring set-up frame [0xFD][2] brought the peer's ring (memfd) and the
// signalling end of its wake-up link, which this takes over; we poll a
// link of our own (see ring_link.h).
void NativeChannel::TakeRing(int ring_fd, int wake_fd) {
  if (rings_ == nullptr) rings_.reset(new RingLink());
  const int err = rings_->AttachInbound(ring_fd);
  CloseFd(ring_fd);
  if (err != 0) {
    CloseFd(wake_fd);
    rings_->SetCorrupt(err == -EALREADY ? "a second ring set-up" : "the peer's ring could not be attached");
    return;
  }
  if (rings_->TakePeerWake(wake_fd) != 0) {
    rings_->SetCorrupt("the peer's wake-up descriptor is not a unix stream socket");
    return;
  }
  CHECK_EQ(uv_poll_init(data_->loop, &ring_poll_, rings_->inbound_wake_fd()), 0);
  AttachUvHandle(reinterpret_cast<uv_handle_t*>(&ring_poll_));
  ring_poll_started_ = true;
  data_->ring_readers.push_back(this);
  // The socket alone decides whether the channel keeps the process alive.
  uv_unref(reinterpret_cast<uv_handle_t*>(&ring_poll_));
  CHECK_EQ(uv_poll_start(&ring_poll_, UV_READABLE, OnRingPoll), 0);
  if (rings_answer_ && QueueRingSetup()) ring_setup_unflushed_ = true;
}

// Delivers ring records marked <= limit (the socket bytes framed so far
// by default). With the ring empty it announces sleep, so the writer's next
// record signals our wake-up link; with a record waiting for socket bytes it
// does not: the read that brings them drains the ring again. Without
// announce, an empty ring returns kEmpty and the caller decides.
NativeChannel::RingDrain NativeChannel::DrainRing(Local<Context> context, std::vector<Local<Value>>* messages,
                                                  std::vector<Local<Value>>* errors,
                                                  std::vector<Local<Value>>* handle_fds,
                                                  v8::TryCatch* try_catch, uint64_t limit, bool announce) {
  // Before a socket frame (an explicit limit) every earlier record must
  // go first, however many; otherwise the batch is bounded.
  const bool bounded = limit == UINT64_MAX;
  if (bounded) limit = socket_framed_;
  rings_->DoneSleeping();
  for (int n = 0;; n++) {
    if (bounded && n >= kMaxRingRecordsPerWake) {
      // Come back after the rest of the loop has had its turn.
      rings_->WakeSelf();
      return RingDrain::kMore;
    }
    const uint8_t* frames = nullptr;
    size_t size = 0;
    switch (rings_->Read(limit, &frames, &size)) {
      case RingLink::ReadStatus::kRecord: {
        counters_.bytes_in += static_cast<double>(size);
        const FramingError fe = ring_frames_.Push(frames, size, [&](const FrameReader::Frame& f) {
          rings_->messages_in++;
          DeliverFrame(context, nullptr, f, Inbound::Source::kRing, messages, errors, handle_fds, try_catch);
        });
        if (fe != FramingError::kNone || ring_frames_.buffered() != 0) {
          rings_->SetCorrupt(fe == FramingError::kMessageTooLarge
                                 ? "a ring frame exceeds maxMessageSize"
                                 : "a ring record does not hold whole frames");
          return RingDrain::kCorrupt;
        }
        continue;
      }
      case RingLink::ReadStatus::kEmpty:
        if (!announce) return RingDrain::kEmpty;
        if (rings_->PrepareToSleep()) return RingDrain::kSleeping;
        continue;
      case RingLink::ReadStatus::kWaiting:
        return RingDrain::kWaiting;
      case RingLink::ReadStatus::kCorrupt:
        return RingDrain::kCorrupt;
    }
  }
}

// Our wake-up link says the peer wrote to a ring we announced we sleep on.
// Delivers what is there (one JavaScript call per batch), then, while
// records have been following each other within microseconds, waits for
// the next within the adaptive window (SpinWindow) before announcing
// sleep again, so a busy channel skips the sleep and wake-up system calls
// and an idle one sleeps at once. One wake-up is bounded in time; the
// rest of the event loop gets its turn after it.
void NativeChannel::OnRingPoll(uv_poll_t* handle, int status, int events) {
  NativeChannel* self = FromUvHandle<NativeChannel>(handle->data);
  if (self->closing_ || self->ended()) return;
  RingLink* rings = self->rings_.get();
  Isolate* isolate = self->data_->isolate;
  HandleScope scope(isolate);
  Local<Context> context = self->context_.Get(isolate);
  Context::Scope context_scope(context);
  // A link that was shut down, or that keeps being signalled with no
  // record behind it, would keep this poll firing: the channel ends.
  if (!rings->DrainWake()) {
    self->EndRingCorrupt(context);
    return;
  }
  // Paused: readStart signals the link again.
  if (!self->reading_) return;
  uint64_t now = MonotonicNs();
  if (rings->empty_since_ns != 0) rings->spin.Arrived(rings->WokenGapNs(now));
  rings->empty_since_ns = 0;
  const uint64_t deadline = now + kMaxRingPollNs;
  for (;;) {
    std::vector<Local<Value>> messages, errors, handle_fds;
    self->StartBatch();
    RingDrain drained;
    try {
      v8::TryCatch try_catch(isolate);
      drained = self->DrainRing(context, &messages, &errors, &handle_fds, &try_catch, UINT64_MAX, false);
    } catch (const std::bad_alloc&) {
      Local<Value> err;
      if (!MakeCodedError(self->data_, context, "ERR_PROCWIRE_OUT_OF_MEMORY",
                          "out of memory while reading from the peer; the channel was closed")
               .ToLocal(&err)) {
        return;
      }
      self->End(EndReason::kOutOfMemory, err);
      return;
    }
    self->EmitBatch(messages, errors, handle_fds);
    if (self->closing_ || self->ended()) return;
    if (rings->corrupt_reason() != nullptr) {
      self->EndRingCorrupt(context);
      return;
    }
    // kMore signalled our link; kWaiting is drained by the socket read
    // that brings the bytes it waits for; paused, readStart signals.
    if (drained != RingDrain::kEmpty || !self->reading_) return;
    now = MonotonicNs();
    const uint64_t window = now < deadline ? rings->spin.window_ns() : 0;
    bool found = false;
    if (window > 0) {
      // Yielding rather than pausing: on a machine with more runnable
      // threads than CPUs the writer may be waiting for ours, and a spin
      // that held the CPU would only delay the record it waits for.
      // Records for another channel of this thread end the spin too
      // (without counting as a miss): the event loop delivers them.
      uint64_t t = now;
      bool other = false;
      while (!(found = rings->InboundMaybeReady()) && !(other = self->OtherRingHasRecords()) &&
             (t = MonotonicNs()) - now < window) {
        sched_yield();
      }
      if (found) {
        rings->spin.Arrived(MonotonicNs() - now);
      } else if (!other) {
        rings->spin.Missed(t - now);
      }
    }
    if (!found && rings->PrepareToSleep()) {
      rings->empty_since_ns = now;
      return;
    }
    if (MonotonicNs() >= deadline) {
      rings->WakeSelf();
      return;
    }
  }
}

// Whether another channel of this thread has ring records waiting (see
// LoopRingReader). At most kMaxRingPeersChecked are looked at per call, so a
// process with thousands of channels does not make each spin step long.
bool NativeChannel::OtherRingHasRecords() const {
  const auto& readers = data_->ring_readers;
  const size_t n = readers.size() < kMaxRingPeersChecked ? readers.size() : kMaxRingPeersChecked;
  for (size_t i = 0; i < n; i++) {
    if (readers[i] != this && readers[i]->RingRecordsWaiting()) return true;
  }
  return false;
}

// Registers the methods of the ring side on the channel's template (as Node's
// StreamBase::AddMethods does for its streams).
void NativeChannel::AddRingMethods(Isolate* isolate, Local<FunctionTemplate> ch,
                                   Local<v8::External> external) {
  SetMethod(isolate, ch, external, "allowRings", AllowRings);
  SetMethod(isolate, ch, external, "enableRings", EnableRings);
}

}  // namespace procwire
