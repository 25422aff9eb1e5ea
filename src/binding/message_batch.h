// MessageBatch: what one wake-up hands JavaScript in one onread call. It
// delivers each whole frame (from the socket or a ring record) through the
// control-frame table (src/core/inbound.h) into the batch's lists (messages,
// errors, handle descriptors), decoding it here or copying a small one into
// the buffers JavaScript decodes from (decodeInJs), and hands the batch over
// (Emit) with the bytes and segments it cost.
//
// Ownership and lifetime: a plain member of NativeChannel, created with it.
// A batch's lists (BatchLists) live on the stack of the read that fills
// them: they hold V8 Locals of that read's HandleScope. Threading: the
// environment's thread only.
#ifndef PROCWIRE_BINDING_MESSAGE_BATCH_H_
#define PROCWIRE_BINDING_MESSAGE_BATCH_H_

#include "channel_common.h"

namespace procwire {

class RingSide;
class SegmentSide;

// One batch's lists, in delivery order.
struct BatchLists {
  std::vector<Local<Value>> messages;
  // Pairs (index in messages, error): the error happened before that message.
  std::vector<Local<Value>> errors;
  // Pairs (index in messages, descriptor) for NODE_HANDLE messages.
  std::vector<Local<Value>> handle_fds;
  void Clear() {
    messages.clear();
    errors.clear();
    handle_fds.clear();
  }
};

class MessageBatch {
 public:
  // The batch's back-reference to its channel.
  class Delegate {
   public:
    explicit Delegate(NativeChannel* channel) : channel_(channel) {}
    AddonData* data() const;
    FrameReader& framer() const;
    Inbound& inbound() const;
    Counters& counters() const;
    RingSide& rings() const;
    SegmentSide& segments() const;
    void Call(const Global<Function>& fn, int argc, Local<Value>* argv) const;

   private:
    NativeChannel* channel_;
  };

  explicit MessageBatch(NativeChannel* channel) : delegate_(channel) {}

  static void AddMethods(Isolate* isolate, Local<FunctionTemplate> t, Local<v8::External> external);

  void SetOnRead(Local<Function> fn) { on_read_.Reset(delegate_.data()->isolate, fn); }

  // A batch starts: the JavaScript decode buffers are empty again.
  void Start() {
    js_bytes_used_ = 0;
    js_frames_used_ = 0;
  }
  // One whole frame, in stream order, into the batch.
  void Deliver(Local<Context> context, ReadBlock* block, const FrameReader::Frame& frame,
               Inbound::Source source, BatchLists* lists, v8::TryCatch* try_catch);
  // Hands the batch to JavaScript (if it holds anything) and starts the next.
  void Emit(BatchLists& lists);

  void ReleaseV8Handles() {
    on_read_.Reset();
    js_decode_ = false;
    js_bytes_ref_.Reset();
    js_frames_ref_.Reset();
    js_bytes_ = nullptr;
    js_frames_ = nullptr;
  }

 private:
  void DecodeInJs(const FunctionCallbackInfo<Value>& args);
  bool TakeForJs(const FrameReader::Frame& frame, size_t index);
  bool IsHandleMessage(Local<Context> context, Local<Value> value);

  Delegate delegate_;
  Global<Function> on_read_;
  // Frame bytes delivered in the current batch.
  double frame_bytes_ = 0;
  // Small frames of the batch being assembled that JavaScript decodes
  // (decodeInJs): their payloads back to back, and per frame its index in
  // the batch's messages, offset and length. Cleared when a batch starts
  // and handed over by Emit.
  bool js_decode_ = false;
  Global<v8::Uint8Array> js_bytes_ref_;
  Global<v8::Uint32Array> js_frames_ref_;
  uint8_t* js_bytes_ = nullptr;
  size_t js_bytes_capacity_ = 0;
  size_t js_bytes_used_ = 0;
  uint32_t* js_frames_ = nullptr;
  size_t js_frames_capacity_ = 0;
  size_t js_frames_used_ = 0;
};

}  // namespace procwire

#endif  // PROCWIRE_BINDING_MESSAGE_BATCH_H_
