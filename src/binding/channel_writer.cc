// ChannelWriter: the outbound path; every frame goes to our ring or to the
// socket's write queue here, in byte order (see channel_writer.h).
#include "native_channel_impl.h"

namespace procwire {

// write(value[, transfer: ArrayBuffer[]]) -> total bytes ever queued (monotonic)
void ChannelWriter::Write(const FunctionCallbackInfo<Value>& args) {
  Local<Context> context = args.GetIsolate()->GetCurrentContext();
  EncodedFrame frame;
  AddonData* data = delegate_.data();
  const WireFormat format = delegate_.framer().format();
  if (!delegate_.segments().sending() && !args[1]->IsArray()) {
    // The common case: everything inline, nothing to transfer.
    if (!EncodeFrame(data, context, format, args[0], &frame)) return;
    if (!CheckSize(context, frame, 0)) return;
    Enqueue(frame);
    args.GetReturnValue().Set(TotalPushed());
    return;
  }
  OutOfLine ool;
  delegate_.segments().PrepareOutOfLine(&ool);
  if (args[1]->IsArray()) {
    Local<Array> list = args[1].As<Array>();
    for (uint32_t i = 0; i < list->Length(); i++) {
      Local<Value> item;
      if (!list->Get(context, i).ToLocal(&item)) return;
      if (!item->IsArrayBuffer()) {
        ThrowCodedError(data, context, "ERR_PROCWIRE_INVALID_ARG",
                        "the transfer list holds only ArrayBuffers");
        return;
      }
      if (item.As<ArrayBuffer>()->WasDetached()) {
        ThrowCodedError(data, context, "ERR_PROCWIRE_TRANSFER",
                        "a buffer in the transfer list is already detached");
        return;
      }
      ool.transfer.push_back(item.As<ArrayBuffer>());
    }
  }
  if (!EncodeFrame(data, context, format, args[0], &frame, &ool)) return;
  if (!CheckSize(context, frame, ool.segment_bytes)) {
    AbandonSegments(&ool);
    return;
  }
  if (!ool.refs.empty()) QueueSegmentsControl(&ool);
  Enqueue(frame);
  args.GetReturnValue().Set(TotalPushed());
}

// The control frame that announces a message's segments goes first and
// carries their descriptors, so they reach the peer no later than the
// frame that refers to them.
void ChannelWriter::QueueSegmentsControl(OutOfLine* ool_ptr) {
  OutOfLine& ool = *ool_ptr;
  const size_t segment_count = ool.refs.size();
  uint8_t* control;
  size_t control_size;
  if (ool.any_pooled) {
    // [0xFC][n] + n × [kind][u32 id][u32 length] (docs/protocol.md).
    const size_t payload = SegmentAnnouncementSize(segment_count);
    control_size = kAdvancedHeaderSize + payload;
    control = static_cast<uint8_t*>(std::malloc(control_size));
    CHECK_NOT_NULL(control);
    WriteU32BigEndian(control, static_cast<uint32_t>(payload));
    EncodeSegmentAnnouncement(ool.refs.data(), segment_count, control + kAdvancedHeaderSize);
  } else {
    control_size = kAdvancedHeaderSize + 2;
    control = static_cast<uint8_t*>(std::malloc(control_size));
    CHECK_NOT_NULL(control);
    WriteU32BigEndian(control, 2);
    control[4] = kSegmentsControlByte;
    control[5] = static_cast<uint8_t>(segment_count);
  }
  queue_.Push(OutChunk{control, control_size, FreeBlock, nullptr, std::move(ool.fds)});
  delegate_.segments().CountSent(ool.segment_bytes, segment_count);
}

// writeBuffer(view[, fds]): queues bytes that are already whole frames,
// with copies (dup) of the given descriptors riding on their first byte.
// Tests of hostile input use it to send what a broken peer would.
void ChannelWriter::WriteBuffer(const FunctionCallbackInfo<Value>& args) {
  CHECK(args[0]->IsArrayBufferView());
  Local<v8::ArrayBufferView> view = args[0].As<v8::ArrayBufferView>();
  EncodedFrame frame;
  if (!CopyFrame(args, view, view->ByteLength(), &frame)) return;
  std::vector<int> fds;
  if (args[1]->IsArray()) {
    Local<Context> context = args.GetIsolate()->GetCurrentContext();
    Local<Array> list = args[1].As<Array>();
    for (uint32_t i = 0; i < list->Length() && i < static_cast<uint32_t>(kMaxFdsPerRead); i++) {
      Local<Value> item = list->Get(context, i).ToLocalChecked();
      CHECK(item->IsInt32());
      const int copy = fcntl(item.As<Integer>()->Value(), F_DUPFD_CLOEXEC, 0);
      if (copy >= 0) fds.push_back(copy);
    }
  }
  queue_.Push(OutChunk{frame.data, frame.size, FreeBlock, nullptr, std::move(fds)});
  args.GetReturnValue().Set(TotalPushed());
}

// malloc(size), or null after throwing ERR_PROCWIRE_OUT_OF_MEMORY: a
// frame that cannot be allocated queues nothing, and sending one huge
// message must not abort the process.
uint8_t* ChannelWriter::AllocateFrame(const FunctionCallbackInfo<Value>& args, size_t size) {
  uint8_t* data = static_cast<uint8_t*>(std::malloc(size ? size : 1));
  if (data != nullptr) return data;
  Isolate* isolate = args.GetIsolate();
  isolate->LowMemoryNotification();
  char message[120];
  std::snprintf(message, sizeof(message), "out of memory queueing a frame of %zu bytes; nothing was sent",
                size);
  ThrowCodedError(AddonData::From(args), isolate->GetCurrentContext(), "ERR_PROCWIRE_OUT_OF_MEMORY", message);
  return nullptr;
}

// Copies the first `size` bytes of `view` into a frame of its own (the
// caller's memory is reused for the next message).
bool ChannelWriter::CopyFrame(const FunctionCallbackInfo<Value>& args, Local<v8::ArrayBufferView> view,
                              size_t size, EncodedFrame* frame) {
  uint8_t* data = AllocateFrame(args, size);
  if (data == nullptr) return false;
  view->CopyContents(data, size);
  frame->data = data;
  frame->size = size;
  return true;
}

// writeFrame(view, length) -> total bytes ever queued: the first `length`
// bytes of view are one whole advanced frame (u32 BE length + payload)
// that lib/codec/advanced-fast.js wrote into its scratch memory. It is
// held to maxMessageSize and put in the ring or queued, as write() does
// with what ValueSerializer writes, and counted the same way; the view's
// memory is free again on return.
void ChannelWriter::WriteFrame(const FunctionCallbackInfo<Value>& args) {
  CHECK(args[0]->IsArrayBufferView());
  CHECK(args[1]->IsUint32());
  Local<v8::ArrayBufferView> view = args[0].As<v8::ArrayBufferView>();
  const size_t size = args[1].As<v8::Uint32>()->Value();
  CHECK(size <= view->ByteLength());
  EncodedFrame sized{nullptr, size};
  if (!CheckSize(args.GetIsolate()->GetCurrentContext(), sized, 0)) return;
  // Straight from the view into the ring when it takes the frame: no
  // block of its own to allocate, copy and free.
  if (WriteToRing(static_cast<const uint8_t*>(view->Buffer()->Data()) + view->ByteOffset(), size)) {
    args.GetReturnValue().Set(TotalPushed());
    return;
  }
  if (ShouldWriteNow(size)) {
    if (!WriteFrameNow(args, view, size)) return;
  } else {
    EncodedFrame frame;
    if (!CopyFrame(args, view, size, &frame)) return;
    Enqueue(frame);
  }
  args.GetReturnValue().Set(TotalPushed());
}

// flush() -> total bytes written so far, or -errno when the socket failed.
void ChannelWriter::Flush(const FunctionCallbackInfo<Value>& args) {
  const int err = DoFlush();
  if (err != 0) {
    args.GetReturnValue().Set(ErrnoName(args.GetIsolate(), err));
    return;
  }
  args.GetReturnValue().Set(TotalWritten());
}

// written() -> total bytes written so far (to the socket or into the
// ring), without writing anything: what a closing channel's callbacks
// are settled against.
void ChannelWriter::Written(const FunctionCallbackInfo<Value>& args) {
  args.GetReturnValue().Set(TotalWritten());
}

// stageFrames(bytes): the JavaScript encoder may write the messages of a
// tick after its first back to back into `bytes` (a Buffer the channel
// owns for its whole life) and hand them over with writeStaged, one call
// per batch instead of one writeFrame per message.
void ChannelWriter::StageFrames(const FunctionCallbackInfo<Value>& args) {
  CHECK(args[0]->IsUint8Array());
  Local<v8::Uint8Array> bytes = args[0].As<v8::Uint8Array>();
  stage_ref_.Reset(args.GetIsolate(), bytes);
  stage_ = static_cast<uint8_t*>(bytes->Buffer()->Data()) + bytes->ByteOffset();
  stage_capacity_ = bytes->ByteLength();
}

// writeStaged(length) -> total bytes ever queued: bytes [0, length) of
// the staging buffer are whole advanced frames, each already held to
// maxMessageSize by JavaScript. They go into the ring, and from the first
// the ring does not take on, in order, to the socket's queue as one copied
// block; each is counted as writeFrame counts it. The staging buffer is
// free again on return. If that block cannot be allocated, frames before
// it may already be in the ring, so this throws
// ERR_PROCWIRE_OUT_OF_MEMORY and the caller closes the channel.
void ChannelWriter::WriteStaged(const FunctionCallbackInfo<Value>& args) {
  CHECK(args[0]->IsUint32());
  const size_t length = args[0].As<v8::Uint32>()->Value();
  CHECK_NOT_NULL(stage_);
  CHECK_LE(length, stage_capacity_);
  const uint8_t* stage = stage_;
  size_t at = 0;
  size_t to_socket = length;
  while (at < length) {
    CHECK_LE(kAdvancedHeaderSize, length - at);
    const size_t size = kAdvancedHeaderSize + ReadU32BigEndian(stage + at);
    CHECK_LE(size, length - at);
    if (to_socket == length) {
      if (WriteToRing(stage + at, size)) {
        at += size;
        continue;
      }
      to_socket = at;
    }
    CountSocketFrame(size);
    at += size;
  }
  if (to_socket < length) {
    uint8_t* block = AllocateFrame(args, length - to_socket);
    if (block == nullptr) return;
    std::memcpy(block, stage + to_socket, length - to_socket);
    queue_.Push(OutChunk{block, length - to_socket, FreeBlock, nullptr, {}});
  }
  args.GetReturnValue().Set(TotalPushed());
}

// The sender's side of maxMessageSize: a message whose payload (inline
// bytes plus its segments) is over the limit is refused before a byte is
// queued, so the peer never sees a frame it would have to reject.
bool ChannelWriter::CheckSize(Local<Context> context, EncodedFrame& frame, size_t segment_bytes) {
  const FrameReader& framer = delegate_.framer();
  const size_t header = framer.format() == WireFormat::kAdvanced ? kAdvancedHeaderSize : 1;
  const size_t payload = frame.size >= header ? frame.size - header : 0;
  const size_t max = framer.max_payload_size();
  if (payload <= max && segment_bytes <= max - payload) return true;
  std::free(frame.data);
  frame.data = nullptr;
  char message[160];
  std::snprintf(
      message, sizeof(message), "message of %llu bytes exceeds maxMessageSize (%llu bytes); nothing was sent",
      static_cast<unsigned long long>(payload + segment_bytes), static_cast<unsigned long long>(max));
  ThrowCodedError(delegate_.data(), context, "ERR_PROCWIRE_MESSAGE_TOO_LARGE", message);
  return false;
}

// Puts one frame in the ring, counted as sent, when the ring takes it:
// only while nothing waits for the socket, so the frame is also
// "written" in byte order, which keeps the monotonic byte counts (and
// send callbacks) true. The record's mark is the socket bytes queued so
// far, which orders it against them. The caller keeps `data`.
bool ChannelWriter::WriteToRing(const uint8_t* data, size_t size) {
  RingSide& rings = delegate_.rings();
  if (!rings.out_ready() || !queue_.empty() || delegate_.connecting()) return false;
  if (!rings.link().Write(queue_.total_pushed(), data, size)) {
    if (rings.link().outbound_failed()) rings.OutboundFailed();
    return false;
  }
  ring_user_bytes_ += static_cast<double>(size);
  Counters& counters = delegate_.counters();
  counters.messages_out++;
  counters.histogram_out[SizeBucket(size)]++;
  return true;
}

// Counts a frame bound for the socket. The first large one widens the
// socket's send buffer (see kWidenSendBufferFrame).
void ChannelWriter::CountSocketFrame(size_t size) {
  Counters& counters = delegate_.counters();
  counters.messages_out++;
  counters.histogram_out[SizeBucket(size)]++;
  if (write_policy::WidensSendBuffer(size, send_buffer_widened_)) {
    send_buffer_widened_ = true;
    WidenUnixSendBuffer(delegate_.fd());
  }
}

void ChannelWriter::Enqueue(const EncodedFrame& frame) {
  if (WriteToRing(frame.data, frame.size)) {
    std::free(frame.data);
    return;
  }
  CountSocketFrame(frame.size);
  // Written at once when ShouldWriteNow says so; whatever the socket did
  // not take is queued.
  if (ShouldWriteNow(frame.size)) {
    const size_t written = queue_.TryWrite(delegate_.fd(), frame.data, frame.size);
    if (written == frame.size) {
      std::free(frame.data);
      return;
    }
    if (written > 0) {
      queue_.Push(OutChunk{frame.data + written, frame.size - written, FreeHintBlock, frame.data, {}});
      return;
    }
  }
  queue_.Push(OutChunk{frame.data, frame.size, FreeBlock, nullptr, {}});
  if (write_policy::WritesGatheredOut(frame.size, queue_.queued_bytes())) WriteOutGathered();
}

// Large frames a tick gathered for its flush go out within send() once
// they add up to kWriteNowThreshold, so the peer starts on them while this
// side works on the rest of the tick: otherwise a plain Node child echoing
// large messages waits with an empty socket while its procwire parent
// answers a whole read's worth. Small frames still wait for the tick's one
// writev: writing them out early cost small answers more than it gained
// (measurements in docs/benchmarks.md, "Why the native constants").
// Nothing is settled here; a failed write stays for the tick's flush to
// report, outside send().
void ChannelWriter::WriteOutGathered() {
  if (delegate_.connecting() || delegate_.closing() || want_write_) return;
  int err = 0;
  if (queue_.Flush(delegate_.fd(), &err) == WriteQueue::FlushStatus::kWouldBlock) {
    want_write_ = true;
    delegate_.UpdatePoll();
  }
}

// Whether a frame of `size` bytes is written within send() rather than at
// the flush that ends the tick. As libuv does, a write goes out at once
// when nothing is queued before it (and the ring would not take it), but
// only for the first message since the last flush, and for large frames:
// the small messages that follow in the same tick are gathered into one
// writev by the flush. So a peer starts on the first answer of a batch
// while this side still works on the rest, and a burst of small messages
// still costs one system call.
bool ChannelWriter::ShouldWriteNow(size_t size) {
  if (delegate_.connecting() || delegate_.closing() || !queue_.empty()) return false;
  RingSide& rings = delegate_.rings();
  const bool ring_takes_it = rings.out_ready() && size <= rings.link().max_frame_bytes();
  if (!write_policy::WriteNow(size, ring_takes_it, wrote_since_flush_)) return false;
  wrote_since_flush_ = true;
  return true;
}

// A frame goes to the socket at once, as libuv's uv_try_write does: the
// bytes the socket takes need no copy, and the peer starts reading them
// before this tick ends. The rest is copied and queued. Its memory
// is allocated before anything is written, so running out of memory still
// sends nothing; a failed write is left for the next flush to report,
// outside send(). Returns false after throwing.
bool ChannelWriter::WriteFrameNow(const FunctionCallbackInfo<Value>& args, Local<v8::ArrayBufferView> view,
                                  size_t size) {
  uint8_t* block = AllocateFrame(args, size);
  if (block == nullptr) return false;
  const uint8_t* bytes = static_cast<const uint8_t*>(view->Buffer()->Data()) + view->ByteOffset();
  CountSocketFrame(size);
  const size_t written = queue_.TryWrite(delegate_.fd(), bytes, size);
  if (written == size) {
    std::free(block);
    return true;
  }
  // Only the pages of the part still to send are touched.
  std::memcpy(block + written, bytes + written, size - written);
  queue_.Push(OutChunk{block + written, size - written, FreeHintBlock, block, {}});
  return true;
}

// Returns 0 or an errno.
int ChannelWriter::DoFlush() {
  wrote_since_flush_ = false;
  if (delegate_.connecting() || delegate_.closing()) return 0;
  // One wake-up per batch of ring records, and only for a sleeping reader.
  if (delegate_.rings().out_ready()) delegate_.rings().link().WakeReaderIfNeeded();
  int err = 0;
  switch (queue_.Flush(delegate_.fd(), &err)) {
    case WriteQueue::FlushStatus::kDrained:
      want_write_ = false;
      break;
    case WriteQueue::FlushStatus::kWouldBlock:
      want_write_ = true;
      break;
    case WriteQueue::FlushStatus::kError:
      want_write_ = false;
      delegate_.UpdatePoll();
      return err;
  }
  delegate_.UpdatePoll();
  return 0;
}

// The socket is writable: the queue is flushed, then JavaScript's onwrite
// gets the total bytes written.
bool ChannelWriter::OnWritable(Local<Context> context) {
  const int err = DoFlush();
  if (delegate_.closing()) return false;
  if (err != 0) {
    // A peer that wrote and then hung up: what it wrote is still in
    // our socket, ahead of its end, and Node's channel reads it all
    // before it disconnects. So a reading channel leaves the close to
    // the read side, which delivers those messages and then sees the
    // end (as Channel._peerGoneWhileReading does for flushes that
    // JavaScript starts); the failed write stops watching for
    // writability (DoFlush), so this does not spin.
    if ((err == EPIPE || err == ECONNRESET) && delegate_.reading()) {
      delegate_.ReadAfterPeerGone(context);
      return false;
    }
    delegate_.End(EndReason::kSystemError, err);
    return false;
  }
  delegate_.CallOnWrite(TotalWritten());
  return !delegate_.closing();
}

// Registers the methods of the outbound path on the channel's template (as Node's
// StreamBase::AddMethods does for its streams).
void ChannelWriter::AddMethods(Isolate* isolate, Local<FunctionTemplate> t, Local<v8::External> external) {
  using W = ChannelWriter;
  SetMethod(isolate, t, external, "write", Forward<W, &NativeChannel::writer, &W::Write>);
  SetMethod(isolate, t, external, "writeBuffer", Forward<W, &NativeChannel::writer, &W::WriteBuffer>);
  SetMethod(isolate, t, external, "writeFrame", Forward<W, &NativeChannel::writer, &W::WriteFrame>);
  SetMethod(isolate, t, external, "stageFrames", Forward<W, &NativeChannel::writer, &W::StageFrames>);
  SetMethod(isolate, t, external, "writeStaged", Forward<W, &NativeChannel::writer, &W::WriteStaged>);
  SetMethod(isolate, t, external, "flush", Forward<W, &NativeChannel::writer, &W::Flush>);
  SetMethod(isolate, t, external, "written", Forward<W, &NativeChannel::writer, &W::Written>);
}

}  // namespace procwire
