// NativeChannel's inbound path: socket reads, framing, the control-frame
// table, decoding, and batches handed to JavaScript.
#include "native_channel_impl.h"

namespace procwire {

// enableOutOfLine(): the peer said it takes segments; large views may go
// out of line from now on. (Until then everything goes inline, so a peer
// without shared-memory support, such as one on the JS fallback, is never
// sent a descriptor.)
// acceptHandles(): descriptors that arrive with a NODE_HANDLE message are
// handed to JavaScript (the 6th argument of onread) instead of being
// closed. Only fork channels and named unix channels call this.
void NativeChannel::AcceptHandles(const FunctionCallbackInfo<Value>& args) {
  NativeChannel* self = Unwrap(args);
  CHECK_NOT_NULL(self);
  self->inbound_.AcceptHandles();
}

// decodeInJs(bytes, frames): from now on, small advanced frames that may
// be plain values are left for JavaScript to decode, copied into `bytes`
// (a Buffer) with [index, offset, length] triples in `frames` (a
// Uint32Array), both owned by the channel and reused for every batch (see
// onread in lib/transport/contract.js). Frames that do not fit are
// decoded here.
void NativeChannel::DecodeInJs(const FunctionCallbackInfo<Value>& args) {
  NativeChannel* self = Unwrap(args);
  CHECK_NOT_NULL(self);
  CHECK(args[0]->IsUint8Array());
  CHECK(args[1]->IsUint32Array());
  if (self->reader_.format() != WireFormat::kAdvanced) return;
  Isolate* isolate = args.GetIsolate();
  Local<v8::Uint8Array> bytes = args[0].As<v8::Uint8Array>();
  Local<v8::Uint32Array> frames = args[1].As<v8::Uint32Array>();
  self->js_bytes_ref_.Reset(isolate, bytes);
  self->js_frames_ref_.Reset(isolate, frames);
  self->js_bytes_ = static_cast<uint8_t*>(bytes->Buffer()->Data()) + bytes->ByteOffset();
  self->js_bytes_capacity_ = bytes->ByteLength();
  self->js_frames_ =
      reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(frames->Buffer()->Data()) + frames->ByteOffset());
  self->js_frames_capacity_ = frames->Length() / 3;
  self->js_decode_ = true;
}

// Allocation failure anywhere in the read path (the read block, the
// reassembly buffer, V8's own allocations that throw) closes this channel
// with ERR_PROCWIRE_OUT_OF_MEMORY instead of aborting the process.
void NativeChannel::OnReadable(Local<Context> context) {
  try {
    ReadAll(context);
  } catch (const std::bad_alloc&) {
    if (closing_ || ended()) return;
    Local<Value> err;
    if (!MakeCodedError(data_, context, "ERR_PROCWIRE_OUT_OF_MEMORY",
                        "out of memory while reading from the peer; the channel was closed")
             .ToLocal(&err)) {
      return;
    }
    End(EndReason::kOutOfMemory, err);
  }
}

// Reads until the socket is empty or the per-wake budget is spent, then
// hands every message of those reads to JavaScript in one call; while the
// peer sends large frames, each read's messages instead (kLargeFrameSize).
void NativeChannel::ReadAll(Local<Context> context) {
  Isolate* isolate = data_->isolate;
  std::vector<Local<Value>> messages;
  StartBatch();
  // Pairs (index in messages, error): the error happened before that message.
  std::vector<Local<Value>> errors;
  // Pairs (index in messages, descriptor) for NODE_HANDLE messages.
  std::vector<Local<Value>> handle_fds;
  // How this wake-up ended the stream, if it did; sys_error goes with
  // kSystemError.
  bool open = true;
  EndReason reason = EndReason::kEndOfStream;
  int sys_error = 0;
  size_t bytes_this_wake = 0;
  std::vector<int> fds;

  for (int i = 0; i < kMaxReadsPerWake && bytes_this_wake < kMaxBytesPerWake; i++) {
    const bool large_frames = read_policy::LargeFrames(last_socket_frame_size_);
    if (large_frames && i > 0) {
      EmitBatch(messages, errors, handle_fds);
      messages.clear();
      errors.clear();
      handle_fds.clear();
      if (closing_) return;
      // JavaScript paused or ended the channel: the rest of the socket
      // waits.
      if (!reading_ || ended()) break;
    }
    const size_t read_size = read_policy::ReadSize(last_socket_frame_size_, kReadBufferSize);
    FrameReader::Tail tail = reader_.WritableTail();
    ReadOutcome r;
    if (read_policy::ReadsDirect(tail.size)) {
      r = ReceiveWithFds(fd_, tail.data, tail.size, &fds);
      counters_.read_calls++;
      inbound_.Receive(&fds);
      if (r.bytes > 0) {
        counters_.bytes_in += r.bytes;
        bytes_this_wake += r.bytes;
        v8::TryCatch try_catch(isolate);
        reader_.CommitTail(static_cast<size_t>(r.bytes), [&](const FrameReader::Frame& f) {
          DeliverSocketFrame(context, nullptr, f, &messages, &errors, &handle_fds, &try_catch);
        });
        if (reader_.held()) break;
        continue;
      }
    } else {
      if (block_ == nullptr || block_->given_away() || block_->data() == nullptr) {
        delete block_;
        block_ = nullptr;
        ReadBlock* fresh = new ReadBlock();
        if (fresh->data() == nullptr) {
          delete fresh;
          throw std::bad_alloc();
        }
        block_ = fresh;
      }
      r = ReceiveWithFds(fd_, block_->data(), read_size, &fds);
      counters_.read_calls++;
      inbound_.Receive(&fds);
      if (r.bytes > 0) {
        counters_.bytes_in += r.bytes;
        bytes_this_wake += r.bytes;
        v8::TryCatch try_catch(isolate);
        ReadBlock* block = block_;
        const FramingError fe =
            reader_.Push(block->data(), static_cast<size_t>(r.bytes), [&](const FrameReader::Frame& f) {
              DeliverSocketFrame(context, block, f, &messages, &errors, &handle_fds, &try_catch);
            });
        if (fe != FramingError::kNone) break;  // reported below
        // Stopped at a frame over the hello's limit: judged after this batch.
        if (reader_.held()) break;
        if (static_cast<size_t>(r.bytes) < read_size) break;  // socket drained
        continue;
      }
    }
    if (r.bytes == 0) {
      open = false;
      if (deferred_error_ != 0) {
        reason = EndReason::kSystemError;
        sys_error = deferred_error_;
      }
    } else if (r.bytes != -EAGAIN && r.bytes != -EWOULDBLOCK) {
      open = false;
      reason = EndReason::kSystemError;
      sys_error = static_cast<int>(-r.bytes);
    }
    break;
  }
  // Ring records that were waiting for the socket bytes just read (unless
  // JavaScript paused the channel while handed a read's messages: resuming
  // looks at the ring again).
  if (reading_ && rings_ != nullptr && rings_->has_inbound()) {
    v8::TryCatch try_catch(isolate);
    DrainRing(context, &messages, &errors, &handle_fds, &try_catch);
  }
  if (open && reader_.error() != FramingError::kNone) {
    open = false;
    reason =
        reader_.error() == FramingError::kOutOfMemory ? EndReason::kOutOfMemory : EndReason::kMessageTooLarge;
  }
  if (open && inbound_.error() != InboundError::kNone &&
      inbound_.error() != InboundError::kMalformedRingSetup) {
    open = false;
    reason = EndReason::kSegmentProtocol;
  }
  // A corrupt ring outranks a plain end of stream, not a socket error.
  if ((open || reason == EndReason::kEndOfStream) && rings_ != nullptr &&
      rings_->corrupt_reason() != nullptr) {
    open = false;
    reason = EndReason::kRingCorrupt;
  }
  // The peer closed (or reset the connection, as a unix peer that exits
  // with unread data does) with part of a frame buffered: a message was
  // lost, which a plain 'peer-closed' or 'peer-reset' would hide.
  if (!open && reader_.buffered() > 0 &&
      (reason == EndReason::kEndOfStream || (reason == EndReason::kSystemError && sys_error == ECONNRESET))) {
    reason = EndReason::kTruncated;
  }
  // A descriptor rides on the first byte of the frame that claims it, so
  // once every byte read so far belongs to a complete frame, a descriptor
  // still unclaimed was never announced: it is closed now rather than held.
  inbound_.AfterRead(reader_.buffered());

  const bool delivered = !messages.empty();
  // Messages that came while spinning: a hit.
  if (delivered && socket_spin_active_) socket_spin_rate_.Hit();
  EmitBatch(messages, errors, handle_fds);
  if (closing_) return;
  if (open && reader_.held() && !ReleaseHeldFrames(context)) return;
  if (delivered && open && !ring_poll_started_) StartSocketSpin();
  // Our ring's set-up, queued in answer to the peer's, goes out now.
  if (ring_setup_unflushed_ && open && !ended()) {
    ring_setup_unflushed_ = false;
    const int err = DoFlush();
    if (closing_) return;
    if (err != 0) {
      End(EndReason::kSystemError, Local<Value>(), err);
      return;
    }
  }
  if (open) return;
  EndAfterRead(context, reason, sys_error);
}

// The read stopped at a frame over the provisional (hello) limit, holding it
// and every byte after it. The batch before it was delivered, so the hello
// it completed raised the limit: the held bytes are framed again and
// delivered, in order, batch after batch. A frame still over the limit
// ends the channel as it always did (ERR_PROCWIRE_MESSAGE_TOO_LARGE).
// False when the channel ended or is closing.
bool NativeChannel::ReleaseHeldFrames(Local<Context> context) {
  Isolate* isolate = data_->isolate;
  while (reader_.held() && !closing_ && !ended()) {
    std::vector<Local<Value>> messages;
    std::vector<Local<Value>> errors;
    std::vector<Local<Value>> handle_fds;
    StartBatch();
    FramingError fe;
    {
      v8::TryCatch try_catch(isolate);
      fe = reader_.ReleaseHeld([&](const FrameReader::Frame& f) {
        DeliverSocketFrame(context, nullptr, f, &messages, &errors, &handle_fds, &try_catch);
      });
    }
    inbound_.AfterRead(reader_.buffered());
    EmitBatch(messages, errors, handle_fds);
    if (closing_) return false;
    if (fe != FramingError::kNone) {
      EndAfterRead(context,
                   fe == FramingError::kOutOfMemory ? EndReason::kOutOfMemory : EndReason::kMessageTooLarge,
                   0);
      return false;
    }
  }
  return !closing_ && !ended();
}

// How a read that ended the stream reports it: the error JavaScript gets
// with onend, by reason (the cold end of ReadAll).
void NativeChannel::EndAfterRead(Local<Context> context, EndReason reason, int sys_error) {
  Local<Value> err;
  char message[160];
  switch (reason) {
    case EndReason::kRingCorrupt:
      EndRingCorrupt(context);
      return;
    case EndReason::kSegmentProtocol:
      if (!MakeCodedError(data_, context, "ERR_PROCWIRE_SEGMENT", InboundErrorMessage(inbound_.error()))
               .ToLocal(&err)) {
        return;
      }
      End(reason, err);
      return;
    case EndReason::kOutOfMemory:
      std::snprintf(message, sizeof(message),
                    "out of memory buffering a frame of %llu bytes; the channel was closed",
                    static_cast<unsigned long long>(reader_.error_declared_size()));
      if (!MakeCodedError(data_, context, "ERR_PROCWIRE_OUT_OF_MEMORY", message).ToLocal(&err)) return;
      End(reason, err);
      return;
    case EndReason::kMessageTooLarge:
      std::snprintf(message, sizeof(message), "frame of %llu bytes exceeds maxMessageSize (%llu bytes)",
                    static_cast<unsigned long long>(reader_.error_declared_size()),
                    static_cast<unsigned long long>(reader_.max_payload_size()));
      if (!MakeCodedError(data_, context, "ERR_PROCWIRE_MESSAGE_TOO_LARGE", message).ToLocal(&err)) return;
      End(reason, err);
      return;
    case EndReason::kTruncated:
      EndTruncated(context);
      return;
    case EndReason::kEndOfStream:
    case EndReason::kSystemError:
      End(reason, Local<Value>(), sys_error);
      return;
  }
}

void NativeChannel::StartBatch() {
  js_bytes_used_ = 0;
  js_frames_used_ = 0;
}

// Hands one batch of decoded messages to JavaScript.
void NativeChannel::EmitBatch(std::vector<Local<Value>>& messages, std::vector<Local<Value>>& errors,
                              std::vector<Local<Value>>& handle_fds) {
  Isolate* isolate = data_->isolate;
  bool took_segments = false;
  if (!messages.empty() || !errors.empty() || taken_segments_ > 0 || !handle_fds.empty()) {
    // How many frames of this batch JavaScript decodes (in the buffers it
    // gave decodeInJs).
    const double js_frames = static_cast<double>(js_frames_used_);
    took_segments = taken_segments_ > 0;
    StartBatch();
    Local<Array> list = Array::New(isolate, messages.data(), messages.size());
    Local<Value> error_list = errors.empty()
                                  ? Local<Value>(v8::Undefined(isolate))
                                  : Local<Value>(Array::New(isolate, errors.data(), errors.size()));
    // Segments taken in this wake-up (count, bytes), so JavaScript can
    // acknowledge them to the sender, whose in-flight count bounds them.
    // frameBytes: every byte this batch cost us (frames and their
    // segments), so JavaScript can bound a backlog in bytes.
    Local<Value> argv[] = {list,
                           error_list,
                           Number::New(isolate, taken_segments_),
                           Number::New(isolate, taken_segment_bytes_),
                           Number::New(isolate, frame_bytes_ + taken_segment_bytes_),
                           handle_fds.empty()
                               ? Local<Value>(v8::Undefined(isolate))
                               : Local<Value>(Array::New(isolate, handle_fds.data(), handle_fds.size())),
                           Number::New(isolate, js_frames)};
    taken_segments_ = 0;
    taken_segment_bytes_ = 0;
    frame_bytes_ = 0;
    Call(on_read_, 7, argv);
  }
  // The batch was handled: V8 may do its pending collection work now
  // (see LetCollectorCatchUp).
  if (took_segments) LetCollectorCatchUp(isolate);
}

void NativeChannel::EndTruncated(Local<Context> context) {
  Local<Value> err;
  char message[160];
  std::snprintf(
      message, sizeof(message),
      "the peer closed the stream in the middle of a frame: %llu bytes of a partial message were lost",
      static_cast<unsigned long long>(reader_.buffered()));
  if (!MakeCodedError(data_, context, "ERR_PROCWIRE_FRAME_TRUNCATED", message).ToLocal(&err)) return;
  End(EndReason::kTruncated, err);
}

// One whole frame, from the socket or a ring record, in stream order: the
// inbound protocol (src/core/inbound.h) says whether it is a control frame
// and which descriptors it owns; a message is decoded.
void NativeChannel::DeliverFrame(Local<Context> context, ReadBlock* block, const FrameReader::Frame& frame,
                                 Inbound::Source source, std::vector<Local<Value>>* messages,
                                 std::vector<Local<Value>>* errors, std::vector<Local<Value>>* handle_fds,
                                 v8::TryCatch* try_catch) {
  Isolate* isolate = data_->isolate;
  Inbound::Frame claimed;
  // After a protocol error nothing more is delivered: the channel closes
  // once this read's batch is handed over.
  if (inbound_.OnFrame(frame.data, frame.size, source, &claimed) != Inbound::Status::kOk) {
    if (inbound_.error() == InboundError::kMalformedRingSetup) {
      // Reported as the ring's corruption, like every other ring set-up
      // failure.
      if (rings_ == nullptr) rings_.reset(new RingLink());
      rings_->SetCorrupt(InboundErrorMessage(inbound_.error()));
    }
    return;
  }
  if (claimed.kind == Inbound::FrameKind::kRingSetup) {
    frame_bytes_ += static_cast<double>(frame.size);
    TakeRing(claimed.fds[0], claimed.fds[1]);
    return;
  }
  frame_bytes_ += static_cast<double>(frame.size + (reader_.format() == WireFormat::kAdvanced ? 4 : 1));
  if (claimed.kind == Inbound::FrameKind::kSegmentAnnouncement) return;
  counters_.messages_in++;
  counters_.histogram_in[SizeBucket(frame.size + (reader_.format() == WireFormat::kAdvanced ? 4 : 1))]++;
  Local<Value> value;
  PayloadMemory* memory = frame.in_place ? block : nullptr;
  ReassembledMemory reassembled(&reader_, frame.data,
                                reader_.format() == WireFormat::kAdvanced ? kAdvancedHeaderSize : 0);
  if (!frame.in_place && frame.size >= kLendReassembledThreshold) memory = &reassembled;
  InSegments segments;
  InSegments* with_segments = nullptr;
  const char* bad_segments = nullptr;
  if (ool_enabled_) {
    bad_segments = claimed.entries.empty()
                       ? MapSegments(isolate, &claimed.fds, &segments)
                       : TakePooledSegments(isolate, claimed.entries, &claimed.fds, &segments);
    // Even with none announced, a procwire peer's frame may only refer to
    // segments it announced: an empty list turns stray references into
    // coded errors rather than "unknown tag".
    with_segments = &segments;
    if (!segments.buffers.empty()) counters_.ool_messages_in++;
  }
  if (bad_segments != nullptr) {
    // The announced segments failed their checks: this frame is skipped
    // with a coded error; the stream itself is intact.
    const char* why = bad_segments;
    counters_.decode_errors++;
    Local<Value> err;
    if (!MakeCodedError(data_, context, "ERR_PROCWIRE_SEGMENT", why).ToLocal(&err)) {
      err = v8::Undefined(isolate);
    }
    errors->push_back(Integer::NewFromUnsigned(isolate, static_cast<uint32_t>(messages->size())));
    errors->push_back(err);
    return;
  }
  // Handles always travel by the socket: a ring frame never claims one.
  const bool may_carry_handle =
      source == Inbound::Source::kSocket && inbound_.accepts_handles() && inbound_.pending() > 0;
  if (js_decode_ && !may_carry_handle && segments.buffers.empty() && TakeForJs(frame, messages->size())) {
    messages->push_back(v8::Undefined(isolate));
    return;
  }
  if (DecodePayload(data_, context, reader_.format(), frame.data, frame.size, memory, &value, with_segments,
                    reader_.max_payload_size())) {
    if (may_carry_handle && IsHandleMessage(context, value)) {
      // Node's protocol: the descriptor that arrived with (or before) a
      // NODE_HANDLE message is that message's handle.
      const int fd = inbound_.TakeHandle();
      handle_fds->push_back(Integer::NewFromUnsigned(isolate, static_cast<uint32_t>(messages->size())));
      handle_fds->push_back(Integer::New(isolate, fd));
    }
    messages->push_back(value);
    return;
  }
  // The frame itself was intact, so the stream stays in sync: the error is
  // reported in order and reading goes on.
  counters_.decode_errors++;
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
bool NativeChannel::TakeForJs(const FrameReader::Frame& frame, size_t index) {
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
bool NativeChannel::IsHandleMessage(Local<Context> context, Local<Value> value) {
  if (!value->IsObject() || value->IsArrayBufferView()) return false;
  Isolate* isolate = data_->isolate;
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

// Registers the methods of the inbound path on the channel's template (as Node's
// StreamBase::AddMethods does for its streams).
void NativeChannel::AddReaderMethods(Isolate* isolate, Local<FunctionTemplate> ch,
                                     Local<v8::External> external) {
  SetMethod(isolate, ch, external, "acceptHandles", AcceptHandles);
  SetMethod(isolate, ch, external, "decodeInJs", DecodeInJs);
}

}  // namespace procwire
