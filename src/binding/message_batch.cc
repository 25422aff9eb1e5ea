// MessageBatch: frames delivered into the batch JavaScript gets in one
// onread call (see message_batch.h).
#include "native_channel_impl.h"

namespace procwire {

// decodeInJs(bytes, frames): from now on, small advanced frames that may
// be plain values are left for JavaScript to decode, copied into `bytes`
// (a Buffer) with [index, offset, length] triples in `frames` (a
// Uint32Array), both owned by the channel and reused for every batch (see
// onread in lib/transport/contract.js). Frames that do not fit are
// decoded here.
void MessageBatch::DecodeInJs(const FunctionCallbackInfo<Value>& args) {
  CHECK(args[0]->IsUint8Array());
  CHECK(args[1]->IsUint32Array());
  if (delegate_.framer().format() != WireFormat::kAdvanced) return;
  Isolate* isolate = args.GetIsolate();
  Local<v8::Uint8Array> bytes = args[0].As<v8::Uint8Array>();
  Local<v8::Uint32Array> frames = args[1].As<v8::Uint32Array>();
  js_bytes_ref_.Reset(isolate, bytes);
  js_frames_ref_.Reset(isolate, frames);
  js_bytes_ = static_cast<uint8_t*>(bytes->Buffer()->Data()) + bytes->ByteOffset();
  js_bytes_capacity_ = bytes->ByteLength();
  js_frames_ =
      reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(frames->Buffer()->Data()) + frames->ByteOffset());
  js_frames_capacity_ = frames->Length() / 3;
  js_decode_ = true;
}

// Hands one batch of decoded messages to JavaScript.
void MessageBatch::Emit(BatchLists& lists) {
  Isolate* isolate = delegate_.data()->isolate;
  SegmentSide& segments = delegate_.segments();
  const std::vector<Local<Value>>& messages = lists.messages;
  const std::vector<Local<Value>>& errors = lists.errors;
  const std::vector<Local<Value>>& handle_fds = lists.handle_fds;
  const double taken_segments = segments.taken_segments();
  const double taken_segment_bytes = segments.taken_segment_bytes();
  bool took_segments = false;
  if (!messages.empty() || !errors.empty() || taken_segments > 0 || !handle_fds.empty()) {
    // How many frames of this batch JavaScript decodes (in the buffers it
    // gave decodeInJs).
    const double js_frames = static_cast<double>(js_frames_used_);
    took_segments = taken_segments > 0;
    Start();
    Local<Array> list = Array::New(isolate, const_cast<Local<Value>*>(messages.data()), messages.size());
    Local<Value> error_list =
        errors.empty()
            ? Local<Value>(v8::Undefined(isolate))
            : Local<Value>(Array::New(isolate, const_cast<Local<Value>*>(errors.data()), errors.size()));
    // Segments taken in this wake-up (count, bytes), so JavaScript can
    // acknowledge them to the sender, whose in-flight count bounds them.
    // frameBytes: every byte this batch cost us (frames and their
    // segments), so JavaScript can bound a backlog in bytes.
    Local<Value> argv[] = {
        list,
        error_list,
        Number::New(isolate, taken_segments),
        Number::New(isolate, taken_segment_bytes),
        Number::New(isolate, frame_bytes_ + taken_segment_bytes),
        handle_fds.empty() ? Local<Value>(v8::Undefined(isolate))
                           : Local<Value>(Array::New(isolate, const_cast<Local<Value>*>(handle_fds.data()),
                                                     handle_fds.size())),
        Number::New(isolate, js_frames)};
    segments.ResetTaken();
    frame_bytes_ = 0;
    delegate_.Call(on_read_, 7, argv);
  }
  // The batch was handled: V8 may do its pending collection work now
  // (see LetCollectorCatchUp).
  if (took_segments) LetCollectorCatchUp(isolate);
}

// One whole frame, from the socket or a ring record, in stream order: the
// inbound protocol (src/core/inbound.h) says whether it is a control frame
// and which descriptors it owns; a message is decoded.
void MessageBatch::Deliver(Local<Context> context, ReadBlock* block, const FrameReader::Frame& frame,
                           Inbound::Source source, BatchLists* lists, v8::TryCatch* try_catch) {
  AddonData* data = delegate_.data();
  Isolate* isolate = data->isolate;
  Inbound& inbound = delegate_.inbound();
  FrameReader& framer = delegate_.framer();
  Counters& counters = delegate_.counters();
  std::vector<Local<Value>>* messages = &lists->messages;
  std::vector<Local<Value>>* errors = &lists->errors;
  Inbound::Frame claimed;
  // After a protocol error nothing more is delivered: the channel closes
  // once this read's batch is handed over.
  if (inbound.OnFrame(frame.data, frame.size, source, &claimed) != Inbound::Status::kOk) {
    if (inbound.error() == InboundError::kMalformedRingSetup) {
      // Reported as the ring's corruption, like every other ring set-up
      // failure.
      delegate_.rings().SetCorrupt(InboundErrorMessage(inbound.error()));
    }
    return;
  }
  if (claimed.kind == Inbound::FrameKind::kRingSetup) {
    frame_bytes_ += static_cast<double>(frame.size);
    delegate_.rings().TakeRing(claimed.fds[0], claimed.fds[1]);
    return;
  }
  frame_bytes_ += static_cast<double>(frame.size + (framer.format() == WireFormat::kAdvanced ? 4 : 1));
  if (claimed.kind == Inbound::FrameKind::kSegmentAnnouncement) return;
  counters.messages_in++;
  counters.histogram_in[SizeBucket(frame.size + (framer.format() == WireFormat::kAdvanced ? 4 : 1))]++;
  Local<Value> value;
  PayloadMemory* memory = frame.in_place ? block : nullptr;
  ReassembledMemory reassembled(&framer, frame.data,
                                framer.format() == WireFormat::kAdvanced ? kAdvancedHeaderSize : 0);
  if (!frame.in_place && frame.size >= kLendReassembledThreshold) memory = &reassembled;
  InSegments segments;
  InSegments* with_segments = nullptr;
  const char* bad_segments = nullptr;
  SegmentSide& side = delegate_.segments();
  if (side.receiving()) {
    bad_segments = claimed.entries.empty()
                       ? side.MapSegments(isolate, &claimed.fds, &segments)
                       : side.TakePooledSegments(isolate, claimed.entries, &claimed.fds, &segments);
    // Even with none announced, a procwire peer's frame may only refer to
    // segments it announced: an empty list turns stray references into
    // coded errors rather than "unknown tag".
    with_segments = &segments;
    if (!segments.buffers.empty()) counters.ool_messages_in++;
  }
  if (bad_segments != nullptr) {
    // The announced segments failed their checks: this frame is skipped
    // with a coded error; the stream itself is intact.
    const char* why = bad_segments;
    counters.decode_errors++;
    Local<Value> err;
    if (!MakeCodedError(data, context, "ERR_PROCWIRE_SEGMENT", why).ToLocal(&err)) {
      err = v8::Undefined(isolate);
    }
    errors->push_back(Integer::NewFromUnsigned(isolate, static_cast<uint32_t>(messages->size())));
    errors->push_back(err);
    return;
  }
  // Handles always travel by the socket: a ring frame never claims one.
  const bool may_carry_handle =
      source == Inbound::Source::kSocket && inbound.accepts_handles() && inbound.pending() > 0;
  if (js_decode_ && !may_carry_handle && segments.buffers.empty() && TakeForJs(frame, messages->size())) {
    messages->push_back(v8::Undefined(isolate));
    return;
  }
  if (DecodePayload(data, context, framer.format(), frame.data, frame.size, memory, &value, with_segments,
                    framer.max_payload_size())) {
    if (may_carry_handle && IsHandleMessage(context, value)) {
      // Node's protocol: the descriptor that arrived with (or before) a
      // NODE_HANDLE message is that message's handle.
      const int fd = inbound.TakeHandle();
      lists->handle_fds.push_back(Integer::NewFromUnsigned(isolate, static_cast<uint32_t>(messages->size())));
      lists->handle_fds.push_back(Integer::New(isolate, fd));
    }
    messages->push_back(value);
    return;
  }
  // The frame itself was intact, so the stream stays in sync: the error is
  // reported in order and reading goes on.
  counters.decode_errors++;
  Local<Value> err = try_catch->HasCaught() ? try_catch->Exception() : Local<Value>(v8::Undefined(isolate));
  try_catch->Reset();
  errors->push_back(Integer::NewFromUnsigned(isolate, static_cast<uint32_t>(messages->size())));
  errors->push_back(err);
}

// Copies a small frame for JavaScript to decode, as messages[index]; false
// (nothing kept) when it is too big or its bytes hold a host object's tag
// ('\\': a Buffer, a view, a segment) or a resizable ArrayBuffer's ('~'):
// those keep the native decoder, which borrows memory, maps segments and
// bounds maxByteLength. The check runs on our copy: a ring frame's bytes
// are in memory the peer can still write.
bool MessageBatch::TakeForJs(const FrameReader::Frame& frame, size_t index) {
  if (frame.size > kJsDecodeMaxBytes || index > UINT32_MAX || js_frames_used_ == js_frames_capacity_ ||
      frame.size > js_bytes_capacity_ - js_bytes_used_) {
    return false;
  }
  uint8_t* copy = js_bytes_ + js_bytes_used_;
  std::memcpy(copy, frame.data, frame.size);
  if (std::memchr(copy, '\\', frame.size) != nullptr || std::memchr(copy, '~', frame.size) != nullptr)
    return false;
  uint32_t* triple = js_frames_ + 3 * js_frames_used_++;
  triple[0] = static_cast<uint32_t>(index);
  triple[1] = static_cast<uint32_t>(js_bytes_used_);
  triple[2] = static_cast<uint32_t>(frame.size);
  js_bytes_used_ += frame.size;
  return true;
}

// True for { cmd: 'NODE_HANDLE', ... }: a plain decoded object, so reading
// cmd runs no user code.
bool MessageBatch::IsHandleMessage(Local<Context> context, Local<Value> value) {
  if (!value->IsObject() || value->IsArrayBufferView()) return false;
  Isolate* isolate = delegate_.data()->isolate;
  Local<v8::String> key = v8::String::NewFromUtf8Literal(isolate, "cmd");
  Local<Object> object = value.As<Object>();
  // Own data properties only: nothing inherited (a patched prototype) runs.
  if (!object->HasOwnProperty(context, key).FromMaybe(false)) return false;
  Local<Value> cmd;
  if (!object->Get(context, key).ToLocal(&cmd)) return false;
  if (!cmd->IsString()) return false;
  v8::String::Utf8Value text(isolate, cmd);
  return text.length() == 11 && std::memcmp(*text, "NODE_HANDLE", 11) == 0;
}

// Registers the batch's method on the channel's template (as Node's
// StreamBase::AddMethods does for its streams).
void MessageBatch::AddMethods(Isolate* isolate, Local<FunctionTemplate> t, Local<v8::External> external) {
  SetMethod(isolate, t, external, "decodeInJs",
            Forward<MessageBatch, &NativeChannel::batch, &MessageBatch::DecodeInJs>);
}

}  // namespace procwire
