// The NativeChannel class, private to the files that implement it (see
// native_channel.h for what it is, and docs/internals.md, "Native channel",
// for how the work is divided). Only the channel's own files include this
// header.
//
// NativeChannel is a small state holder over six collaborators, each a
// plain member with its own header and .cc file:
//   ChannelWriter  the outbound path (channel_writer.*);
//   ChannelReader  the inbound path from the socket (channel_reader.*);
//   MessageBatch   frames delivered into the batch JavaScript gets
//                  (message_batch.*);
//   RingSide       the shared-memory rings (ring_side.*);
//   SegmentSide    out-of-line segments and their pools (segment_side.*);
//   SocketSpin     the short spin after a socket read (socket_spin.*).
// NativeChannel itself keeps New() and its argument checks, the phase, the
// socket's poll handle and OnPoll (pure dispatch), the shared stream state
// (framing, the control-frame table, counters), End, close and stats().
//
// Each collaborator reaches its channel only through its own Delegate: a
// non-virtual class holding the NativeChannel pointer, whose few methods are
// defined inline at the end of this header. Being members (not pointers)
// and non-virtual, they add no allocation and no indirect call to the hot
// paths: a delegate call compiles to a field access at a fixed offset.
// Ownership and lifetime: the collaborators live and die with the channel
// (a HandleWrap, see handle_wrap.h). Threading: the environment's thread.
#ifndef PROCWIRE_BINDING_NATIVE_CHANNEL_IMPL_H_
#define PROCWIRE_BINDING_NATIVE_CHANNEL_IMPL_H_

#include "native_channel.h"

#include "channel_common.h"
#include "channel_reader.h"
#include "channel_writer.h"
#include "message_batch.h"
#include "ring_side.h"
#include "segment_side.h"
#include "socket_spin.h"

namespace procwire {

class NativeChannel final : public HandleWrap {
 public:
  NativeChannel(AddonData* data, Local<Context> context, Local<Object> wrapper, int fd, WireFormat format,
                size_t max_message_size, bool connecting, Local<Object> callbacks, double ool_threshold);

  static NativeChannel* Unwrap(const FunctionCallbackInfo<Value>& args) {
    return HandleWrap::Unwrap<NativeChannel>(args);
  }
  // The channel behind one of its libuv handles.
  static NativeChannel* FromUv(void* handle_data) { return FromUvHandle<NativeChannel>(handle_data); }

  static void New(const FunctionCallbackInfo<Value>& args);

  // The collaborators, for their JS method wrappers and libuv callbacks.
  ChannelWriter& writer() { return writer_; }
  ChannelReader& reader() { return reader_; }
  MessageBatch& batch() { return batch_; }
  RingSide& rings() { return rings_; }
  SegmentSide& segments() { return segments_; }
  SocketSpin& spin() { return spin_; }

  uv_handle_t* ref_handle() override { return reinterpret_cast<uv_handle_t*>(&poll_); }
  void ReleaseV8Handles() override;

 private:
  friend void InitNativeChannel(AddonData* data, Local<Context> context, Local<Object> exports);
  friend class ChannelWriter::Delegate;
  friend class ChannelReader::Delegate;
  friend class MessageBatch::Delegate;
  friend class RingSide::Delegate;
  friend class SegmentSide::Delegate;
  friend class SocketSpin::Delegate;

  // Where the stream is: connecting (a connect() in progress), open, or
  // ended (onend was called; nothing is read or written any more). Closing
  // is HandleWrap's (closing_), after any of these.
  enum class Phase : uint8_t { kConnecting, kOpen, kEnded };

  static void SetMaxMessageSize(const FunctionCallbackInfo<Value>& args);
  static void ReadStart(const FunctionCallbackInfo<Value>& args);
  static void ReadStop(const FunctionCallbackInfo<Value>& args);
  static void Stats(const FunctionCallbackInfo<Value>& args);
  static void Fd(const FunctionCallbackInfo<Value>& args);
  static Local<Function> GetFunction(Local<Context> context, Local<Object> from, const char* name);

  bool connecting() const { return phase_ == Phase::kConnecting; }
  bool ended() const { return phase_ == Phase::kEnded; }
  void UpdatePoll();
  static void OnPoll(uv_poll_t* handle, int status, int events);
  void FinishConnect();
  void FailConnect(int so_error);
  void End(EndReason reason, Local<Value> err, int sys_error = 0);
  void CloseUvHandles() override;

  ~NativeChannel() override {
    CloseFd(fd_);
    writer_.Clear();
  }

  int fd_;
  uv_poll_t poll_;
  int poll_events_ = 0;
  Phase phase_;
  // Framing of the socket's bytes.
  FrameReader framer_;
  // The limit the channel was made with: a lower one set later is a
  // handshake's provisional limit (see SetMaxMessageSize).
  size_t configured_max_message_size_;
  // Received descriptors and the control frames that claim them.
  Inbound inbound_;
  Counters counters_;
  Global<Function> on_write_, on_end_, on_connect_;

  ChannelWriter writer_;
  ChannelReader reader_;
  MessageBatch batch_;
  RingSide rings_;
  SegmentSide segments_;
  SocketSpin spin_;
};

// The thin static wrappers each collaborator's AddMethods registers: they
// unwrap the channel and call the collaborator's method (inlined: the
// member function pointers are template arguments).
template <typename Part, Part& (NativeChannel::*kGet)(),
          void (Part::*kMethod)(const FunctionCallbackInfo<Value>&)>
void Forward(const FunctionCallbackInfo<Value>& args) {
  NativeChannel* self = NativeChannel::Unwrap(args);
  CHECK_NOT_NULL(self);
  ((self->*kGet)().*kMethod)(args);
}

// As Forward, for methods reachable after close (the object is gone):
// they do nothing then.
template <typename Part, Part& (NativeChannel::*kGet)(),
          void (Part::*kMethod)(const FunctionCallbackInfo<Value>&)>
void ForwardIfOpen(const FunctionCallbackInfo<Value>& args) {
  NativeChannel* self = NativeChannel::Unwrap(args);
  if (self == nullptr) return;
  ((self->*kGet)().*kMethod)(args);
}

// ---- the Delegates -----------------------------------------------------

inline AddonData* ChannelWriter::Delegate::data() const { return channel_->data_; }
inline int ChannelWriter::Delegate::fd() const { return channel_->fd_; }
inline bool ChannelWriter::Delegate::connecting() const { return channel_->connecting(); }
inline bool ChannelWriter::Delegate::closing() const { return channel_->closing_; }
inline bool ChannelWriter::Delegate::reading() const { return channel_->reader_.reading(); }
inline const FrameReader& ChannelWriter::Delegate::framer() const { return channel_->framer_; }
inline Counters& ChannelWriter::Delegate::counters() const { return channel_->counters_; }
inline RingSide& ChannelWriter::Delegate::rings() const { return channel_->rings_; }
inline SegmentSide& ChannelWriter::Delegate::segments() const { return channel_->segments_; }
inline void ChannelWriter::Delegate::UpdatePoll() const { channel_->UpdatePoll(); }
inline void ChannelWriter::Delegate::End(EndReason reason, int sys_error) const {
  channel_->End(reason, Local<Value>(), sys_error);
}
inline void ChannelWriter::Delegate::ReadAfterPeerGone(Local<Context> context) const {
  channel_->reader_.OnReadable(context);
}
inline void ChannelWriter::Delegate::CallOnWrite(double written) const {
  Local<Value> argv[] = {Number::New(channel_->data_->isolate, written)};
  channel_->Call(channel_->on_write_, 1, argv);
}

inline AddonData* ChannelReader::Delegate::data() const { return channel_->data_; }
inline int ChannelReader::Delegate::fd() const { return channel_->fd_; }
inline bool ChannelReader::Delegate::closing() const { return channel_->closing_; }
inline bool ChannelReader::Delegate::ended() const { return channel_->ended(); }
inline FrameReader& ChannelReader::Delegate::framer() const { return channel_->framer_; }
inline Inbound& ChannelReader::Delegate::inbound() const { return channel_->inbound_; }
inline Counters& ChannelReader::Delegate::counters() const { return channel_->counters_; }
inline MessageBatch& ChannelReader::Delegate::batch() const { return channel_->batch_; }
inline RingSide& ChannelReader::Delegate::rings() const { return channel_->rings_; }
inline ChannelWriter& ChannelReader::Delegate::writer() const { return channel_->writer_; }
inline SocketSpin& ChannelReader::Delegate::spin() const { return channel_->spin_; }
inline void ChannelReader::Delegate::UpdatePoll() const { channel_->UpdatePoll(); }
inline void ChannelReader::Delegate::End(EndReason reason, Local<Value> err, int sys_error) const {
  channel_->End(reason, err, sys_error);
}

inline AddonData* MessageBatch::Delegate::data() const { return channel_->data_; }
inline FrameReader& MessageBatch::Delegate::framer() const { return channel_->framer_; }
inline Inbound& MessageBatch::Delegate::inbound() const { return channel_->inbound_; }
inline Counters& MessageBatch::Delegate::counters() const { return channel_->counters_; }
inline RingSide& MessageBatch::Delegate::rings() const { return channel_->rings_; }
inline SegmentSide& MessageBatch::Delegate::segments() const { return channel_->segments_; }
inline void MessageBatch::Delegate::Call(const Global<Function>& fn, int argc, Local<Value>* argv) const {
  channel_->Call(fn, argc, argv);
}

inline AddonData* RingSide::Delegate::data() const { return channel_->data_; }
inline Local<Context> RingSide::Delegate::context() const {
  return channel_->context_.Get(channel_->data_->isolate);
}
inline void RingSide::Delegate::Attach(uv_handle_t* handle) { channel_->AttachUvHandle(handle); }
inline bool RingSide::Delegate::closing() const { return channel_->closing_; }
inline bool RingSide::Delegate::ended() const { return channel_->ended(); }
inline bool RingSide::Delegate::reading() const { return channel_->reader_.reading(); }
inline WireFormat RingSide::Delegate::format() const { return channel_->framer_.format(); }
inline Counters& RingSide::Delegate::counters() const { return channel_->counters_; }
inline Inbound& RingSide::Delegate::inbound() const { return channel_->inbound_; }
inline double RingSide::Delegate::total_pushed() const { return channel_->writer_.TotalPushed(); }
inline void RingSide::Delegate::Push(OutChunk chunk) { channel_->writer_.Push(std::move(chunk)); }
inline uint64_t RingSide::Delegate::socket_framed() const { return channel_->reader_.socket_framed(); }
inline MessageBatch& RingSide::Delegate::batch() const { return channel_->batch_; }
inline void RingSide::Delegate::End(EndReason reason, Local<Value> err) { channel_->End(reason, err); }

inline AddonData* SegmentSide::Delegate::data() const { return channel_->data_; }
inline size_t SegmentSide::Delegate::max_payload_size() const { return channel_->framer_.max_payload_size(); }
inline Counters& SegmentSide::Delegate::counters() const { return channel_->counters_; }
inline Inbound& SegmentSide::Delegate::inbound() const { return channel_->inbound_; }
inline bool SegmentSide::Delegate::closing() const { return channel_->closing_; }
inline bool SegmentSide::Delegate::may_call() const {
  return !channel_->closing_ && !channel_->ended() && !channel_->teardown_;
}
inline Local<Context> SegmentSide::Delegate::context() const {
  return channel_->context_.Get(channel_->data_->isolate);
}
inline void SegmentSide::Delegate::Call(const Global<Function>& fn, int argc, Local<Value>* argv) const {
  channel_->Call(fn, argc, argv);
}

inline uv_loop_t* SocketSpin::Delegate::loop() const { return channel_->data_->loop; }
inline bool SocketSpin::Delegate::only_channel() const { return channel_->data_->open_channels == 1; }
inline void SocketSpin::Delegate::Attach(uv_handle_t* handle) { channel_->AttachUvHandle(handle); }
inline bool SocketSpin::Delegate::reading() const {
  return !channel_->closing_ && !channel_->ended() && channel_->reader_.reading();
}

}  // namespace procwire

#endif  // PROCWIRE_BINDING_NATIVE_CHANNEL_IMPL_H_
