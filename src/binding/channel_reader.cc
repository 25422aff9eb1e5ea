// ChannelReader: the inbound path from the socket: reads, framing, held
// frames and how a read that ended the stream reports it (see
// channel_reader.h).
#include "native_channel_impl.h"

#include <sys/ioctl.h>

namespace procwire {

// acceptHandles(): descriptors that arrive with a NODE_HANDLE message are
// handed to JavaScript (the 6th argument of onread) instead of being
// closed. Only fork channels and named unix channels call this.
void ChannelReader::AcceptHandles(const FunctionCallbackInfo<Value>& args) {
  delegate_.inbound().AcceptHandles();
}

// Allocation failure anywhere in the read path (the read block, the
// reassembly buffer, V8's own allocations that throw) closes this channel
// with ERR_PROCWIRE_OUT_OF_MEMORY instead of aborting the process.
void ChannelReader::OnReadable(Local<Context> context) {
  try {
    ReadAll(context);
  } catch (const std::bad_alloc&) {
    if (delegate_.closing() || delegate_.ended()) return;
    EndOutOfMemory(delegate_, context);
  }
}

// Reads until the socket is empty or the per-wake budget is spent, then
// hands every message of those reads to JavaScript in one call; while the
// peer sends large frames, each read's messages instead (kLargeFrameSize).
void ChannelReader::ReadAll(Local<Context> context) {
  Isolate* isolate = delegate_.data()->isolate;
  MessageBatch& batch = delegate_.batch();
  RingSide& rings = delegate_.rings();
  FrameReader& framer = delegate_.framer();
  BatchLists lists;
  batch.Start();
  // How this wake-up ended the stream, if it did.
  ReadEnd end;
  if (!ReadSocket(context, &lists, &end)) return;
  // Ring records that were waiting for the socket bytes just read (unless
  // JavaScript paused the channel while handed a read's messages: resuming
  // looks at the ring again).
  if (reading() && rings.has_inbound()) {
    v8::TryCatch try_catch(isolate);
    rings.Drain(context, &lists, &try_catch);
  }
  end = JudgeReadEnd(end, framer.error(), delegate_.inbound().error(), rings.corrupt_reason() != nullptr,
                     framer.buffered());
  // A descriptor rides on the first byte of the frame that claims it, so
  // once every byte read so far belongs to a complete frame, a descriptor
  // still unclaimed was never announced: it is closed now rather than held.
  delegate_.inbound().AfterRead(framer.buffered());

  const bool delivered = !lists.messages.empty();
  // Messages that came while spinning: a hit.
  if (delivered) delegate_.spin().HitIfSpinning();
  batch.Emit(lists);
  if (delegate_.closing()) return;
  if (end.open && framer.held() && !ReleaseHeldFrames(context)) return;
  if (delivered && end.open && !rings.polling()) delegate_.spin().Start();
  // Our ring's set-up, queued in answer to the peer's, goes out now.
  if (end.open && !delegate_.ended() && rings.TakeUnflushedAnswer()) {
    const int err = delegate_.writer().DoFlush();
    if (delegate_.closing()) return;
    if (err != 0) {
      delegate_.End(EndReason::kSystemError, Local<Value>(), err);
      return;
    }
  }
  if (end.open) return;
  EndAfterRead(context, end.reason, end.sys_error);
}

// A read block to read into: the current one unless Buffers took it.
ReadBlock* ChannelReader::FreshBlock() {
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
  return block_;
}

// The socket reads of one wake-up (the read policy bounds them), their
// frames delivered into lists. False when JavaScript closed the channel
// while handed a large frame's batch.
bool ChannelReader::ReadSocket(Local<Context> context, BatchLists* lists, ReadEnd* end) {
  Isolate* isolate = delegate_.data()->isolate;
  FrameReader& framer = delegate_.framer();
  Inbound& inbound = delegate_.inbound();
  Counters& counters = delegate_.counters();
  const int fd = delegate_.fd();
  size_t bytes_this_wake = 0;
  std::vector<int> fds;
  for (int i = 0; i < kMaxReadsPerWake && bytes_this_wake < kMaxBytesPerWake; i++) {
    const bool large_frames = read_policy::LargeFrames(last_socket_frame_size_);
    if (large_frames && i > 0) {
      delegate_.batch().Emit(*lists);
      lists->Clear();
      if (delegate_.closing()) return false;
      // JavaScript paused or ended the channel: the rest of the socket
      // waits.
      if (!reading() || delegate_.ended()) break;
    }
    const size_t read_size = read_policy::ReadSize(last_socket_frame_size_, kReadBufferSize);
    FrameReader::Tail tail = framer.WritableTail();
    ReadOutcome r;
    if (read_policy::ReadsDirect(tail.size)) {
      r = ReceiveWithFds(fd, tail.data, tail.size, &fds);
      counters.read_calls++;
      inbound.Receive(&fds);
      if (r.bytes > 0) {
        counters.bytes_in += r.bytes;
        bytes_this_wake += r.bytes;
        v8::TryCatch try_catch(isolate);
        framer.CommitTail(static_cast<size_t>(r.bytes), [&](const FrameReader::Frame& f) {
          DeliverSocketFrame(context, nullptr, f, lists, &try_catch);
        });
        if (framer.held()) break;
        continue;
      }
    } else {
      ReadBlock* block = FreshBlock();
      r = ReceiveWithFds(fd, block->data(), read_size, &fds);
      counters.read_calls++;
      inbound.Receive(&fds);
      if (r.bytes > 0) {
        counters.bytes_in += r.bytes;
        bytes_this_wake += r.bytes;
        v8::TryCatch try_catch(isolate);
        const FramingError fe = framer.Push(
            block->data(), static_cast<size_t>(r.bytes),
            [&](const FrameReader::Frame& f) { DeliverSocketFrame(context, block, f, lists, &try_catch); });
        if (fe != FramingError::kNone) break;  // reported by JudgeEnd
        // Stopped at a frame over the hello's limit: judged after this batch.
        if (framer.held()) break;
        if (static_cast<size_t>(r.bytes) < read_size) break;  // socket drained
        continue;
      }
    }
    if (r.bytes == 0) {
      end->open = false;
      if (deferred_error_ != 0) {
        end->reason = EndReason::kSystemError;
        end->sys_error = deferred_error_;
      }
    } else if (r.bytes != -EAGAIN && r.bytes != -EWOULDBLOCK) {
      end->open = false;
      end->reason = EndReason::kSystemError;
      end->sys_error = static_cast<int>(-r.bytes);
    }
    break;
  }
  return true;
}

// The read stopped at a frame over the provisional (hello) limit, holding it
// and every byte after it. The batch before it was delivered, so the hello
// it completed raised the limit: the held bytes are framed again and
// delivered, in order, batch after batch. A frame still over the limit
// ends the channel as it always did (ERR_PROCWIRE_MESSAGE_TOO_LARGE).
// False when the channel ended or is closing.
bool ChannelReader::ReleaseHeldFrames(Local<Context> context) {
  Isolate* isolate = delegate_.data()->isolate;
  FrameReader& framer = delegate_.framer();
  MessageBatch& batch = delegate_.batch();
  while (framer.held() && !delegate_.closing() && !delegate_.ended()) {
    BatchLists lists;
    batch.Start();
    FramingError fe;
    {
      v8::TryCatch try_catch(isolate);
      fe = framer.ReleaseHeld(
          [&](const FrameReader::Frame& f) { DeliverSocketFrame(context, nullptr, f, &lists, &try_catch); });
    }
    delegate_.inbound().AfterRead(framer.buffered());
    batch.Emit(lists);
    if (delegate_.closing()) return false;
    if (fe != FramingError::kNone) {
      EndAfterRead(context,
                   fe == FramingError::kOutOfMemory ? EndReason::kOutOfMemory : EndReason::kMessageTooLarge,
                   0);
      return false;
    }
  }
  return !delegate_.closing() && !delegate_.ended();
}

// How a read that ended the stream reports it: the error JavaScript gets
// with onend, by reason (the cold end of ReadAll).
void ChannelReader::EndAfterRead(Local<Context> context, EndReason reason, int sys_error) {
  AddonData* data = delegate_.data();
  const FrameReader& framer = delegate_.framer();
  Local<Value> err;
  char message[160];
  switch (reason) {
    case EndReason::kRingCorrupt:
      delegate_.rings().EndCorrupt(context);
      return;
    case EndReason::kSegmentProtocol:
      if (!MakeCodedError(data, context, "ERR_PROCWIRE_SEGMENT",
                          InboundErrorMessage(delegate_.inbound().error()))
               .ToLocal(&err)) {
        return;
      }
      delegate_.End(reason, err);
      return;
    case EndReason::kOutOfMemory:
      std::snprintf(message, sizeof(message),
                    "out of memory buffering a frame of %llu bytes; the channel was closed",
                    static_cast<unsigned long long>(framer.error_declared_size()));
      if (!MakeCodedError(data, context, "ERR_PROCWIRE_OUT_OF_MEMORY", message).ToLocal(&err)) return;
      delegate_.End(reason, err);
      return;
    case EndReason::kMessageTooLarge:
      std::snprintf(message, sizeof(message), "frame of %llu bytes exceeds maxMessageSize (%llu bytes)",
                    static_cast<unsigned long long>(framer.error_declared_size()),
                    static_cast<unsigned long long>(framer.max_payload_size()));
      if (!MakeCodedError(data, context, "ERR_PROCWIRE_MESSAGE_TOO_LARGE", message).ToLocal(&err)) return;
      delegate_.End(reason, err);
      return;
    case EndReason::kTruncated:
      EndTruncated(context);
      return;
    case EndReason::kEndOfStream:
    case EndReason::kSystemError:
      delegate_.End(reason, Local<Value>(), sys_error);
      return;
  }
}

void ChannelReader::EndTruncated(Local<Context> context) {
  Local<Value> err;
  char message[160];
  std::snprintf(
      message, sizeof(message),
      "the peer closed the stream in the middle of a frame: %llu bytes of a partial message were lost",
      static_cast<unsigned long long>(delegate_.framer().buffered()));
  if (!MakeCodedError(delegate_.data(), context, "ERR_PROCWIRE_FRAME_TRUNCATED", message).ToLocal(&err))
    return;
  delegate_.End(EndReason::kTruncated, err);
}

// Registers the methods of the inbound path on the channel's template (as Node's
// StreamBase::AddMethods does for its streams).
void ChannelReader::AddMethods(Isolate* isolate, Local<FunctionTemplate> t, Local<v8::External> external) {
  SetMethod(isolate, t, external, "acceptHandles",
            Forward<ChannelReader, &NativeChannel::reader, &ChannelReader::AcceptHandles>);
}

// libuv reported an error on the socket. It may still hold data the peer
// sent before it failed: that is read first, then the socket's real error
// (ECONNRESET, EPIPE, ...) ends the channel.
void ChannelReader::OnPollError(Local<Context> context) {
  const int so_error = SocketError(delegate_.fd());
  // Paused with data left: it is read on resume, before the end, which
  // reports this error then (see deferred_error_); ending now would drop
  // what the peer sent before it failed.
  if (!reading() && !delegate_.ended() && !NothingLeftToRead()) {
    if (so_error != 0) deferred_error_ = -so_error;
    flow_ = Flow::kPausedPeerGone;
    return;
  }
  if (reading()) OnReadable(context);
  if (delegate_.closing()) return;
  if ((so_error == 0 || so_error == -ECONNRESET) && delegate_.framer().buffered() > 0) {
    EndTruncated(context);
    return;
  }
  if (so_error == 0) {
    delegate_.End(EndReason::kEndOfStream, Local<Value>());
  } else {
    delegate_.End(EndReason::kSystemError, Local<Value>(), -so_error);
  }
}

// The peer hung up while we are paused. With nothing left to read (no
// byte in the socket, no partial frame, no ring record), the channel
// ends now, as a reading one would: resume() would have nothing to
// deliver, and a paused channel with a dead peer would otherwise stay
// open, unnoticed, for ever. Otherwise the data before the hang-up is
// read (and the end seen) on resume; until then stop watching, as the
// condition is level-triggered and would wake us in a loop.
void ChannelReader::OnHangUpWhilePaused() {
  if (NothingLeftToRead()) {
    delegate_.End(EndReason::kEndOfStream, Local<Value>());
    return;
  }
  flow_ = Flow::kPausedPeerGone;
  delegate_.UpdatePoll();
}

// True when the peer left nothing for this end to read: no byte in the
// socket's receive queue, no partial frame, no ring record.
bool ChannelReader::NothingLeftToRead() {
  int unread = 0;
  if (ioctl(delegate_.fd(), FIONREAD, &unread) != 0 || unread != 0) return false;
  if (delegate_.framer().buffered() != 0) return false;
  return !delegate_.rings().inbound_maybe_ready();
}

// A socket frame starting at socket offset X comes after every ring record
// marked <= X (see ring_link.h).
void ChannelReader::DeliverSocketFrame(Local<Context> context, ReadBlock* block,
                                       const FrameReader::Frame& frame, BatchLists* lists,
                                       v8::TryCatch* try_catch) {
  const uint64_t start = socket_framed_;
  last_socket_frame_size_ = frame.size;
  socket_framed_ +=
      frame.size + (delegate_.framer().format() == WireFormat::kAdvanced ? kAdvancedHeaderSize : 1);
  RingSide& rings = delegate_.rings();
  if (rings.has_inbound()) rings.Drain(context, lists, try_catch, start);
  delegate_.batch().Deliver(context, block, frame, Inbound::Source::kSocket, lists, try_catch);
}

}  // namespace procwire
