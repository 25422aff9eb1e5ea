// RingSide: a native channel's shared-memory rings with a procwire peer on
// this host (src/core/ring_link.h): our ring's set-up frame, the peer's ring
// taken over from its set-up frame, ring records merged with the socket by
// their marks (Drain), the wake-up link's poll handle (OnPoll) and the JS
// methods allowRings and enableRings.
//
// Ownership and lifetime: a plain member of NativeChannel, created with it;
// the RingLink is made when either side sets up a ring and freed with the
// channel. The wake-up link's poll handle is attached to the channel and
// closed with its handles (Close), which also takes this reader off the
// thread's list (AddonData::ring_readers). Threading: the environment's
// thread only; the peer writes the shared memory from its own process.
#ifndef PROCWIRE_BINDING_RING_SIDE_H_
#define PROCWIRE_BINDING_RING_SIDE_H_

#include "channel_common.h"
#include "message_batch.h"

namespace procwire {

class RingSide final : public LoopRingReader {
 public:
  // The ring side's back-reference to its channel.
  class Delegate {
   public:
    explicit Delegate(NativeChannel* channel) : channel_(channel) {}
    AddonData* data() const;
    Local<Context> context() const;
    void Attach(uv_handle_t* handle);
    bool closing() const;
    bool ended() const;
    bool reading() const;
    WireFormat format() const;
    Counters& counters() const;
    Inbound& inbound() const;
    // The writer's total bytes ever queued (enableRings returns it).
    double total_pushed() const;
    // Queues a control frame on the socket (our ring's set-up).
    void Push(OutChunk chunk);
    // Bytes of whole socket frames framed so far (the ring marks' clock).
    uint64_t socket_framed() const;
    MessageBatch& batch() const;
    void End(EndReason reason, Local<Value> err);

   private:
    NativeChannel* channel_;
  };

  // How a Drain call ended.
  enum class Drained : uint8_t {
    kEmpty,     // The ring is empty; sleep was not announced (announce false).
    kSleeping,  // The ring is empty and sleep is announced.
    kWaiting,   // A record waits for socket bytes not read yet.
    kMore,      // The batch budget is spent; our wake-up link is signalled.
    kCorrupt,   // The peer broke the ring (corrupt_reason()).
  };

  RingSide(NativeChannel* channel, WireFormat format, size_t max_message_size)
      : delegate_(channel), frames_(format, max_message_size) {}

  static void AddMethods(Isolate* isolate, Local<FunctionTemplate> t, Local<v8::External> external);

  // Our ring's set-up frame is queued: frames may take our ring.
  bool out_ready() const { return out_ready_; }
  RingLink& link() { return *link_; }
  bool has_inbound() const { return link_ != nullptr && link_->has_inbound(); }
  bool inbound_maybe_ready() const { return link_ != nullptr && link_->InboundMaybeReady(); }
  const char* corrupt_reason() const { return link_ != nullptr ? link_->corrupt_reason() : nullptr; }
  bool enabled() const { return out_ready_ && has_inbound(); }
  double messages_out() const { return link_ != nullptr ? link_->messages_out : 0.0; }
  double messages_in() const { return link_ != nullptr ? link_->messages_in : 0.0; }
  // Whether the peer's ring is polled (from its set-up until close).
  bool polling() const { return polling_; }

  void SetMaxPayloadSize(size_t limit) { frames_.SetMaxPayloadSize(limit); }
  // Records that arrived while paused were not read: look again.
  void LookAgain() {
    if (has_inbound()) link_->WakeSelf();
  }
  // Marks the rings corrupt (the channel ends when the read sees it).
  void SetCorrupt(const char* why);
  // A ring set-up frame brought the peer's ring and wake-up descriptor.
  void TakeRing(int ring_fd, int wake_fd);
  // Creates our ring and queues its set-up frame; false when it exists
  // already, the channel is ending or the ring cannot be made.
  bool QueueSetup();
  // Our set-up, queued in answer to the peer's, still needs a flush: true
  // once, then false.
  bool TakeUnflushedAnswer() {
    if (answer_ != Answer::kQueued) return false;
    answer_ = Answer::kNo;
    return true;
  }
  // Writing to our ring failed: the peer broke its read index.
  void OutboundFailed();
  void EndCorrupt(Local<Context> context);
  // Delivers records marked <= limit (the socket bytes framed so far by
  // default) into the batch.
  Drained Drain(Local<Context> context, BatchLists* lists, v8::TryCatch* try_catch,
                uint64_t limit = UINT64_MAX, bool announce = true);
  void Close(uv_close_cb closed);

  bool RingRecordsWaiting() const override;

 private:
  // Whether our ring is set up in answer to the peer's (the server of a
  // channel that ran the hello): kOnAttach until the peer's ring is
  // attached, then kQueued until the set-up frame was flushed.
  enum class Answer : uint8_t { kNo, kOnAttach, kQueued };

  void AllowRings(const FunctionCallbackInfo<Value>& args);
  void EnableRings(const FunctionCallbackInfo<Value>& args);
  static void OnPoll(uv_poll_t* handle, int status, int events);
  void Poll();
  bool OtherRingHasRecords() const;

  Delegate delegate_;
  // Null until either side sets up a ring.
  std::unique_ptr<RingLink> link_;
  // Frames from ring records, which hold whole frames only.
  FrameReader frames_;
  Answer answer_ = Answer::kNo;
  bool out_ready_ = false;
  bool polling_ = false;
  uv_poll_t poll_;
};

}  // namespace procwire

#endif  // PROCWIRE_BINDING_RING_SIDE_H_
