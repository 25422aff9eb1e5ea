// RingSide: set-up frames, ring reads merged with the socket by their
// marks, and the wake-up link (see ring_side.h and src/core/ring_link.h).
#include "native_channel_impl.h"

namespace procwire {

// allowRings([answer]): the peer may set up a ring towards us (a ring
// set-up control frame is accepted). Called by channels that announce
// `rings`; on channels that run the hello, only once it is done. With
// answer (the server of such a channel), our own ring is set up as soon as
// the peer's is attached, in answer to it.
void RingSide::AllowRings(const FunctionCallbackInfo<Value>& args) {
  delegate_.inbound().AcceptRings();
  // A set-up already queued in answer still gets its flush.
  if (answer_ != Answer::kQueued)
    answer_ = args.Length() > 0 && args[0]->IsTrue() ? Answer::kOnAttach : Answer::kNo;
}

// enableRings() -> total bytes ever queued: the peer announced `rings`;
// creates our outbound ring and queues its set-up frame (with the memfd
// and the signalling end of our wake-up link) on the socket. Frames may
// take the ring from now on; the peer reads them once it has read the
// set-up frame, which comes first (see the socket marks in
// ring_link.h), and is woken once its own set-up brought its link. If the ring cannot be made,
// nothing is announced and everything keeps going by the socket.
void RingSide::EnableRings(const FunctionCallbackInfo<Value>& args) {
  QueueSetup();
  args.GetReturnValue().Set(delegate_.total_pushed());
}

// Creates our outbound ring and queues its set-up frame. False when the
// ring already exists, the channel is ending or the ring cannot be made.
bool RingSide::QueueSetup() {
  if (out_ready_ || delegate_.ended() || delegate_.closing()) return false;
  if (link_ == nullptr) link_.reset(new RingLink());
  int ring_fd = -1;
  int wake_fd = -1;
  if (link_->CreateOutbound(kChannelRingCapacity) != 0 || link_->DupSetupFds(&ring_fd, &wake_fd) != 0) {
    return false;
  }
  uint8_t* control = static_cast<uint8_t*>(std::malloc(kRingSetupFrameMax));
  CHECK_NOT_NULL(control);
  const size_t size = EncodeRingSetupFrame(delegate_.format(), control);
  delegate_.Push(OutChunk{control, size, FreeBlock, nullptr, {ring_fd, wake_fd}});
  out_ready_ = true;
  return true;
}

// The peer moved the read index of our ring to an impossible place. The
// frame at hand (and any after it) goes by the socket, so nothing is
// lost or reordered, and the channel is closed with
// ERR_PROCWIRE_RING_CORRUPT from the ring's poll handle, outside this send.
void RingSide::OutboundFailed() {
  if (link_->corrupt_reason() != nullptr) return;
  link_->SetCorrupt("the peer moved the read index of our ring to an impossible place");
  if (polling_) link_->WakeSelf();
}

void RingSide::SetCorrupt(const char* why) {
  if (link_ == nullptr) link_.reset(new RingLink());
  link_->SetCorrupt(why);
}

void RingSide::EndCorrupt(Local<Context> context) {
  Local<Value> err;
  char message[200];
  std::snprintf(message, sizeof(message),
                "the shared-memory ring from the peer is corrupt: %s; the channel was closed",
                link_->corrupt_reason());
  if (!MakeCodedError(delegate_.data(), context, "ERR_PROCWIRE_RING_CORRUPT", message).ToLocal(&err)) return;
  delegate_.End(EndReason::kRingCorrupt, err);
}

// A ring set-up frame [0xFD][2] brought the peer's ring (memfd) and the
// signalling end of its wake-up link, which this takes over; we poll a
// link of our own (see ring_link.h).
void RingSide::TakeRing(int ring_fd, int wake_fd) {
  if (link_ == nullptr) link_.reset(new RingLink());
  const int err = link_->AttachInbound(ring_fd);
  CloseFd(ring_fd);
  if (err != 0) {
    CloseFd(wake_fd);
    link_->SetCorrupt(err == -EALREADY ? "a second ring set-up" : "the peer's ring could not be attached");
    return;
  }
  if (link_->TakePeerWake(wake_fd) != 0) {
    link_->SetCorrupt("the peer's wake-up descriptor is not a unix stream socket");
    return;
  }
  CHECK_EQ(uv_poll_init(delegate_.data()->loop, &poll_, link_->inbound_wake_fd()), 0);
  delegate_.Attach(reinterpret_cast<uv_handle_t*>(&poll_));
  polling_ = true;
  delegate_.data()->ring_readers.push_back(this);
  // The socket alone decides whether the channel keeps the process alive.
  uv_unref(reinterpret_cast<uv_handle_t*>(&poll_));
  CHECK_EQ(uv_poll_start(&poll_, UV_READABLE, OnPoll), 0);
  if (answer_ == Answer::kOnAttach && QueueSetup()) answer_ = Answer::kQueued;
}

void RingSide::Close(uv_close_cb closed) {
  if (!polling_) return;
  uv_poll_stop(&poll_);
  uv_close(reinterpret_cast<uv_handle_t*>(&poll_), closed);
  auto& readers = delegate_.data()->ring_readers;
  readers.erase(std::remove(readers.begin(), readers.end(), this), readers.end());
}

bool RingSide::RingRecordsWaiting() const {
  return delegate_.reading() && !delegate_.closing() && !delegate_.ended() && link_->InboundMaybeReady();
}

// Delivers ring records marked <= limit (the socket bytes framed so far
// by default). With the ring empty it announces sleep, so the writer's next
// record signals our wake-up link; with a record waiting for socket bytes it
// does not: the read that brings them drains the ring again. Without
// announce, an empty ring returns kEmpty and the caller decides.
RingSide::Drained RingSide::Drain(Local<Context> context, BatchLists* lists, v8::TryCatch* try_catch,
                                  uint64_t limit, bool announce) {
  // Before a socket frame (an explicit limit) every earlier record must
  // go first, however many; otherwise the batch is bounded.
  const bool bounded = limit == UINT64_MAX;
  if (bounded) limit = delegate_.socket_framed();
  MessageBatch& batch = delegate_.batch();
  link_->DoneSleeping();
  for (int n = 0;; n++) {
    if (bounded && n >= kMaxRingRecordsPerWake) {
      // Come back after the rest of the loop has had its turn.
      link_->WakeSelf();
      return Drained::kMore;
    }
    const uint8_t* frames = nullptr;
    size_t size = 0;
    switch (link_->Read(limit, &frames, &size)) {
      case RingLink::ReadStatus::kRecord: {
        delegate_.counters().bytes_in += static_cast<double>(size);
        const FramingError fe = frames_.Push(frames, size, [&](const FrameReader::Frame& f) {
          link_->messages_in++;
          batch.Deliver(context, nullptr, f, Inbound::Source::kRing, lists, try_catch);
        });
        if (fe != FramingError::kNone || frames_.buffered() != 0) {
          link_->SetCorrupt(fe == FramingError::kMessageTooLarge
                                ? "a ring frame exceeds maxMessageSize"
                                : "a ring record does not hold whole frames");
          return Drained::kCorrupt;
        }
        continue;
      }
      case RingLink::ReadStatus::kEmpty:
        if (!announce) return Drained::kEmpty;
        if (link_->PrepareToSleep()) return Drained::kSleeping;
        continue;
      case RingLink::ReadStatus::kWaiting:
        return Drained::kWaiting;
      case RingLink::ReadStatus::kCorrupt:
        return Drained::kCorrupt;
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
void RingSide::OnPoll(uv_poll_t* handle, int status, int events) {
  NativeChannel::FromUv(handle->data)->rings().Poll();
}

void RingSide::Poll() {
  if (delegate_.closing() || delegate_.ended()) return;
  RingLink* rings = link_.get();
  Isolate* isolate = delegate_.data()->isolate;
  HandleScope scope(isolate);
  Local<Context> context = delegate_.context();
  Context::Scope context_scope(context);
  // A link that was shut down, or that keeps being signalled with no
  // record behind it, would keep this poll firing: the channel ends.
  if (!rings->DrainWake()) {
    EndCorrupt(context);
    return;
  }
  // Paused: readStart signals the link again.
  if (!delegate_.reading()) return;
  uint64_t now = MonotonicNs();
  if (rings->empty_since_ns != 0) rings->spin.Arrived(rings->WokenGapNs(now));
  rings->empty_since_ns = 0;
  const uint64_t deadline = now + kMaxRingPollNs;
  for (;;) {
    BatchLists lists;
    MessageBatch& batch = delegate_.batch();
    batch.Start();
    Drained drained;
    try {
      v8::TryCatch try_catch(isolate);
      drained = Drain(context, &lists, &try_catch, UINT64_MAX, false);
    } catch (const std::bad_alloc&) {
      EndOutOfMemory(delegate_, context);
      return;
    }
    batch.Emit(lists);
    if (delegate_.closing() || delegate_.ended()) return;
    if (rings->corrupt_reason() != nullptr) {
      EndCorrupt(context);
      return;
    }
    // kMore signalled our link; kWaiting is drained by the socket read
    // that brings the bytes it waits for; paused, readStart signals.
    if (drained != Drained::kEmpty || !delegate_.reading()) return;
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
      while (!(found = rings->InboundMaybeReady()) && !(other = OtherRingHasRecords()) &&
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
bool RingSide::OtherRingHasRecords() const {
  const auto& readers = delegate_.data()->ring_readers;
  const size_t n = readers.size() < kMaxRingPeersChecked ? readers.size() : kMaxRingPeersChecked;
  for (size_t i = 0; i < n; i++) {
    if (readers[i] != this && readers[i]->RingRecordsWaiting()) return true;
  }
  return false;
}

// Registers the methods of the ring side on the channel's template (as Node's
// StreamBase::AddMethods does for its streams).
void RingSide::AddMethods(Isolate* isolate, Local<FunctionTemplate> t, Local<v8::External> external) {
  SetMethod(isolate, t, external, "allowRings",
            Forward<RingSide, &NativeChannel::rings, &RingSide::AllowRings>);
  SetMethod(isolate, t, external, "enableRings",
            Forward<RingSide, &NativeChannel::rings, &RingSide::EnableRings>);
}

}  // namespace procwire
