// ChannelWriter: a native channel's outbound path. Every frame goes to our
// ring or to the socket's write queue here, in byte order: the JS methods
// write, writeBuffer, writeFrame, stageFrames/writeStaged, flush and
// written; frames written at once within send() (write-now) or gathered out
// early; the monotonic byte counts that send callbacks are settled against
// (see docs/internals.md, "Byte counters").
//
// Ownership and lifetime: a plain member of NativeChannel, created with it;
// the queue's chunks are freed with the channel (Clear, from its
// destructor). Threading: the environment's thread only.
#ifndef PROCWIRE_BINDING_CHANNEL_WRITER_H_
#define PROCWIRE_BINDING_CHANNEL_WRITER_H_

#include "channel_common.h"

namespace procwire {

class RingSide;
class SegmentSide;

class ChannelWriter {
 public:
  // The writer's back-reference to its channel.
  class Delegate {
   public:
    explicit Delegate(NativeChannel* channel) : channel_(channel) {}
    AddonData* data() const;
    int fd() const;
    bool connecting() const;
    bool closing() const;
    bool reading() const;
    const FrameReader& framer() const;
    Counters& counters() const;
    RingSide& rings() const;
    SegmentSide& segments() const;
    void UpdatePoll() const;
    void End(EndReason reason, int sys_error) const;
    // A failed write on a reading channel: the read side delivers what the
    // peer wrote before it hung up, then sees the end.
    void ReadAfterPeerGone(Local<Context> context) const;
    void CallOnWrite(double written) const;

   private:
    NativeChannel* channel_;
  };

  explicit ChannelWriter(NativeChannel* channel) : delegate_(channel) {}

  static void AddMethods(Isolate* isolate, Local<FunctionTemplate> t, Local<v8::External> external);

  // Monotonic byte counts over both ways out (see Write and Flush).
  double TotalPushed() const { return ring_user_bytes_ + static_cast<double>(queue_.total_pushed()); }
  double TotalWritten() const { return ring_user_bytes_ + static_cast<double>(queue_.total_written()); }
  size_t queued_bytes() const { return queue_.queued_bytes(); }
  double write_calls() const { return static_cast<double>(queue_.write_calls()); }
  bool empty() const { return queue_.empty(); }
  size_t total_pushed_to_socket() const { return queue_.total_pushed(); }
  // The socket must tell us when it is writable again.
  bool want_write() const { return want_write_; }
  void StopWriting() { want_write_ = false; }
  // Queues a chunk for the socket as it is (a control frame).
  void Push(OutChunk chunk) { queue_.Push(std::move(chunk)); }
  void Clear() { queue_.Clear(); }

  // Writes what is queued; returns 0 or an errno.
  int DoFlush();
  // The socket is writable: flushes and tells JavaScript. False when the
  // channel ended or is closing (nothing more for this wake-up).
  bool OnWritable(Local<Context> context);

  void ReleaseV8Handles() {
    stage_ref_.Reset();
    stage_ = nullptr;
  }

 private:
  void Write(const FunctionCallbackInfo<Value>& args);
  void WriteBuffer(const FunctionCallbackInfo<Value>& args);
  void WriteFrame(const FunctionCallbackInfo<Value>& args);
  void Flush(const FunctionCallbackInfo<Value>& args);
  void Written(const FunctionCallbackInfo<Value>& args);
  void StageFrames(const FunctionCallbackInfo<Value>& args);
  void WriteStaged(const FunctionCallbackInfo<Value>& args);

  static uint8_t* AllocateFrame(const FunctionCallbackInfo<Value>& args, size_t size);
  static bool CopyFrame(const FunctionCallbackInfo<Value>& args, Local<v8::ArrayBufferView> view, size_t size,
                        EncodedFrame* frame);
  void QueueSegmentsControl(OutOfLine* ool);
  bool CheckSize(Local<Context> context, EncodedFrame& frame, size_t segment_bytes);
  bool WriteToRing(const uint8_t* data, size_t size);
  void CountSocketFrame(size_t size);
  void Enqueue(const EncodedFrame& frame);
  void WriteOutGathered();
  bool ShouldWriteNow(size_t size);
  bool WriteFrameNow(const FunctionCallbackInfo<Value>& args, Local<v8::ArrayBufferView> view, size_t size);

  Delegate delegate_;
  WriteQueue queue_;
  // Frame bytes that went by the ring (they count as written at once).
  double ring_user_bytes_ = 0;
  // Whether a large frame widened the socket's send buffer (CountSocketFrame).
  bool send_buffer_widened_ = false;
  bool want_write_ = false;
  // A message was written within send() since the last flush (see
  // ShouldWriteNow).
  bool wrote_since_flush_ = false;
  // The staging buffer of stageFrames, the channel's for its whole life;
  // JavaScript writes it, and it is read only within writeStaged.
  Global<v8::Uint8Array> stage_ref_;
  uint8_t* stage_ = nullptr;
  size_t stage_capacity_ = 0;
};

}  // namespace procwire

#endif  // PROCWIRE_BINDING_CHANNEL_WRITER_H_
