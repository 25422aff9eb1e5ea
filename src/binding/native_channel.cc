#include "native_channel.h"

#include <node.h>
#include <uv.h>

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "../core/channel_stats.h"
#include "../core/end_reason.h"
#include "../core/frame_reader.h"
#include "../core/inbound.h"
#include "../core/protocol.h"
#include "../core/socket_io.h"
#include "../core/write_queue.h"
#include "codec.h"
#include "handle_wrap.h"
#include "payload_memory.h"
#include "ring_transport.h"
#include "segments.h"

namespace procwire {

using v8::Array;
using v8::ArrayBuffer;
using v8::BackingStore;
using v8::Context;
using v8::Function;
using v8::FunctionCallbackInfo;
using v8::FunctionTemplate;
using v8::Global;
using v8::HandleScope;
using v8::Integer;
using v8::Isolate;
using v8::Local;
using v8::MaybeLocal;
using v8::Number;
using v8::Object;
using v8::Value;

namespace {

// Reads per wake-up, and bytes, before yielding to the rest of the loop, so
// one busy peer cannot starve other handles.
constexpr int kMaxReadsPerWake = 32;
constexpr size_t kMaxBytesPerWake = 8 * 1024 * 1024;
// A pending large frame is read straight into its reassembly buffer when at
// least this much of it is missing.
constexpr size_t kDirectReadThreshold = 64 * 1024;
// While the peer sends frames from kLargeFrameSize up to kLargeFrameLimit
// long, the socket is read kLargeFrameReadSize at a time and each read's
// messages go to JavaScript before the next read, as Node's own channel
// does with 64 KiB reads. JavaScript's work per such message (parsing it,
// the handler, the answer) outweighs a crossing, and handing them over early
// sends the answers sooner while the peer's socket keeps being read between
// them. Reading everything first and then running JavaScript for a quarter
// of a megabyte of messages let a plain Node child's socket fill: its sends
// then went through libuv's write queue, each with a request and a callback
// (json 8-64 KiB at 256 in flight: about 5-15% fewer round trips than Node's
// parent). Smaller frames keep one kReadBufferSize read and one hand-over
// per wake-up: there the crossing and the system call are the cost (32 KiB
// reads handed over each cost json 1 KiB round trips 15%). So do frames of
// kLargeFrameLimit and more, which are mostly read straight into their
// reassembly buffers: a 32 KiB read at the start of each cost json 256 KiB
// round trips 16% at 16 in flight.
constexpr size_t kLargeFrameSize = 2 * 1024;
constexpr size_t kLargeFrameLimit = 128 * 1024;
constexpr size_t kLargeFrameReadSize = 32 * 1024;
// The first frame at least this large that a channel sends by its socket
// widens the socket's send buffer to kUnixSendBufferSize (unix sockets
// only; see there why small messages keep the kernel's default). From 16 KiB
// on the larger buffer paid: procwire on both sides over the socket,
// advanced 16 KiB at 256 in flight, 172k -> 221k round trips/s.
constexpr size_t kWidenSendBufferFrame = 16 * 1024;
// A frame at least this large, with nothing queued before it, is written to
// the socket within send() (see ShouldWriteNow); so are a tick's gathered
// frames once they add up to this much, when the frame just queued is at
// least kWriteGatheredMinFrame (see WriteOutGathered).
constexpr size_t kWriteNowThreshold = 64 * 1024;
constexpr size_t kWriteGatheredMinFrame = 8 * 1024;
// The control frames' first bytes (docs/protocol.md): [0xFE][n] announces a
// message's segments, [0xFD][1] sets up the sender's ring.
using protocol::kRingControlByte;
using protocol::kRingSetupVersion;
using protocol::kSegmentsControlByte;
// Ring records delivered per wake-up before yielding to the rest of the loop.
constexpr int kMaxRingRecordsPerWake = 4096;
// The longest one ring wake-up keeps the event loop (delivering and
// spinning) before the rest of the loop gets its turn.
constexpr uint64_t kMaxRingPollNs = 1000000;
// A sched_yield() that took longer than this gave the CPU to another
// thread: the socket spin stops (see NativeChannel::OnSocketSpin).
constexpr uint64_t kSpinYieldContendedNs = 20000;
// The longest socket spin (NativeChannel::StartSocketSpin); when to spin is
// SpinHitRate's to say.
constexpr uint64_t kSocketSpinNs = 30000;
// Other channels' rings a spinning reader looks at per step (see
// OtherRingHasRecords).
constexpr size_t kMaxRingPeersChecked = 64;

// Advanced frames up to this size are handed to JavaScript as bytes, to be
// decoded there by the fast path (lib/codec/advanced-fast.js), when the
// channel asked for it (decodeInJs): for small messages, setting up V8's
// ValueDeserializer costs more than the whole JavaScript decode.
constexpr size_t kJsDecodeMaxBytes = 2048;

void FreeBlock(uint8_t* data, void* /*hint*/) { std::free(data); }
// For a chunk that starts inside its block: the hint is the block.
void FreeHintBlock(uint8_t* /*data*/, void* hint) { std::free(hint); }

struct Counters {
  double messages_in = 0, messages_out = 0, bytes_in = 0, decode_errors = 0, read_calls = 0;
  // Messages (and their segment bytes) that travelled out of line.
  double ool_messages_out = 0, ool_bytes_out = 0, ool_messages_in = 0, ool_bytes_in = 0;
  double histogram_in[kHistogramBuckets] = {};
  double histogram_out[kHistogramBuckets] = {};
};

class NativeChannel final : public HandleWrap, public LoopRingReader {
 public:
  NativeChannel(AddonData* data, Local<Context> context, Local<Object> wrapper, int fd, WireFormat format,
                size_t max_message_size, bool connecting, Local<Object> callbacks, double ool_threshold)
      : HandleWrap(data, context, wrapper, "PROCWIRE_CHANNEL"),
        fd_(fd),
        reader_(format, max_message_size),
        ring_frames_(format, max_message_size),
        connecting_(connecting),
        ool_enabled_(ool_threshold >= 0 && format == WireFormat::kAdvanced),
        ool_threshold_(ool_threshold >= 0 ? static_cast<size_t>(ool_threshold) : SIZE_MAX) {
    data->open_channels++;
    Isolate* isolate = data->isolate;
    on_read_.Reset(isolate, GetFunction(context, callbacks, "onread"));
    on_write_.Reset(isolate, GetFunction(context, callbacks, "onwrite"));
    on_end_.Reset(isolate, GetFunction(context, callbacks, "onend"));
    on_connect_.Reset(isolate, GetFunction(context, callbacks, "onconnect"));
    Local<Value> on_return;
    if (callbacks->Get(context, OneByteString(isolate, "onsegmentreturn")).ToLocal(&on_return) &&
        on_return->IsFunction()) {
      on_segment_return_.Reset(isolate, on_return.As<Function>());
    }
    if (ool_enabled_) inbound_.AcceptSegments();
    CHECK_EQ(uv_poll_init_socket(data->loop, &poll_, fd), 0);
    AttachUvHandle(reinterpret_cast<uv_handle_t*>(&poll_));
    UpdatePoll();
  }

  static NativeChannel* Unwrap(const FunctionCallbackInfo<Value>& args) {
    return HandleWrap::Unwrap<NativeChannel>(args);
  }

  // new Channel(fd, format, maxMessageSize, connecting, callbacks[, outOfLineThreshold])
  // A threshold of -1 (or none) keeps every message inline; only channels to
  // procwire peers over unix sockets get one. Bad arguments throw a coded
  // error (never a CHECK): the constructor is reachable from user code.
  static void New(const FunctionCallbackInfo<Value>& args) {
    AddonData* data = AddonData::From(args);
    Local<Context> context = args.GetIsolate()->GetCurrentContext();
    auto bad = [&](const char* why) { ThrowCodedError(data, context, "ERR_PROCWIRE_INVALID_ARG", why); };
    if (!args.IsConstructCall()) return bad("NativeChannel must be called with new");
    if (!(args[0]->IsInt32() && args[1]->IsInt32() && args[2]->IsNumber() && args[3]->IsBoolean() &&
          args[4]->IsObject())) {
      return bad("NativeChannel(fd, format, maxMessageSize, connecting, callbacks): bad argument types");
    }
    if (!(args[5]->IsUndefined() || args[5]->IsNumber()) ||
        !(args[6]->IsUndefined() || args[6]->IsFloat64Array())) {
      return bad("NativeChannel: bad outOfLineThreshold or counters");
    }
    const double ool_threshold = args[5]->IsNumber() ? args[5].As<Number>()->Value() : -1;
    const int fd = args[0].As<Integer>()->Value();
    const WireFormat format = args[1].As<Integer>()->Value() == 1 ? WireFormat::kJson : WireFormat::kAdvanced;
    const double max = args[2].As<Number>()->Value();
    if (!(max >= 0)) return bad("NativeChannel: maxMessageSize must be a non-negative number");
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
      return bad("NativeChannel: fd must be an open socket descriptor");
    }
    if (args[6]->IsFloat64Array() && args[6].As<v8::Float64Array>()->Length() < 2) {
      return bad("NativeChannel: the counters array needs 2 elements");
    }
    for (const char* name : {"onread", "onwrite", "onend", "onconnect"}) {
      Local<Value> fn;
      if (!args[4].As<Object>()->Get(context, OneByteString(args.GetIsolate(), name)).ToLocal(&fn)) return;
      if (!fn->IsFunction()) return bad("NativeChannel: callbacks need onread, onwrite, onend and onconnect");
    }
    NativeChannel* self = new NativeChannel(data, context, args.This(), fd, format, static_cast<size_t>(max),
                                            args[3]->IsTrue(), args[4].As<Object>(), ool_threshold);
    if (args[6]->IsFloat64Array()) {
      // Counters JavaScript reads without a call: [segment bytes sent,
      // segments sent]. The array stays alive with the channel.
      Local<v8::Float64Array> shared = args[6].As<v8::Float64Array>();
      self->shared_counters_.Reset(args.GetIsolate(), shared);
      self->shared_ =
          reinterpret_cast<double*>(static_cast<uint8_t*>(shared->Buffer()->Data()) + shared->ByteOffset());
    }
  }

  // write(value[, transfer: ArrayBuffer[]]) -> total bytes ever queued (monotonic)
  static void Write(const FunctionCallbackInfo<Value>& args) {
    NativeChannel* self = Unwrap(args);
    CHECK_NOT_NULL(self);
    Local<Context> context = args.GetIsolate()->GetCurrentContext();
    EncodedFrame frame;
    if (!self->ool_send_ && !args[1]->IsArray()) {
      // The common case: everything inline, nothing to transfer.
      if (!EncodeFrame(self->data_, context, self->reader_.format(), args[0], &frame)) return;
      if (!self->CheckSize(context, frame, 0)) return;
      self->Enqueue(frame);
      args.GetReturnValue().Set(self->TotalPushed());
      return;
    }
    OutOfLine ool;
    ool.enabled = self->ool_send_;
    ool.threshold = self->ool_threshold_;
    ool.pool = self->send_pool_.get();
    ool.strict_transfer = !self->trusting_peer_;
    if (args[1]->IsArray()) {
      Local<Array> list = args[1].As<Array>();
      for (uint32_t i = 0; i < list->Length(); i++) {
        Local<Value> item;
        if (!list->Get(context, i).ToLocal(&item)) return;
        if (!item->IsArrayBuffer()) {
          ThrowCodedError(self->data_, context, "ERR_PROCWIRE_INVALID_ARG",
                          "the transfer list holds only ArrayBuffers");
          return;
        }
        if (item.As<ArrayBuffer>()->WasDetached()) {
          ThrowCodedError(self->data_, context, "ERR_PROCWIRE_TRANSFER",
                          "a buffer in the transfer list is already detached");
          return;
        }
        ool.transfer.push_back(item.As<ArrayBuffer>());
      }
    }
    if (!EncodeFrame(self->data_, context, self->reader_.format(), args[0], &frame, &ool)) return;
    if (!self->CheckSize(context, frame, ool.segment_bytes)) {
      AbandonSegments(&ool);
      return;
    }
    if (!ool.refs.empty()) {
      // The control frame goes first and carries the descriptors, so they
      // reach the peer no later than the frame that refers to them.
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
      self->queue_.Push(OutChunk{control, control_size, FreeBlock, nullptr, std::move(ool.fds)});
      self->counters_.ool_messages_out++;
      self->counters_.ool_bytes_out += static_cast<double>(ool.segment_bytes);
      if (self->shared_ != nullptr) {
        self->shared_[0] += static_cast<double>(ool.segment_bytes);
        self->shared_[1] += static_cast<double>(segment_count);
      }
    }
    self->Enqueue(frame);
    args.GetReturnValue().Set(self->TotalPushed());
  }

  // writeBuffer(view[, fds]): queues bytes that are already whole frames,
  // with copies (dup) of the given descriptors riding on their first byte.
  // Tests of hostile input use it to send what a broken peer would.
  static void WriteBuffer(const FunctionCallbackInfo<Value>& args) {
    NativeChannel* self = Unwrap(args);
    CHECK_NOT_NULL(self);
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
    self->queue_.Push(OutChunk{frame.data, frame.size, FreeBlock, nullptr, std::move(fds)});
    args.GetReturnValue().Set(self->TotalPushed());
  }

  // malloc(size), or null after throwing ERR_PROCWIRE_OUT_OF_MEMORY: a
  // frame that cannot be allocated queues nothing, and sending one huge
  // message must not abort the process.
  static uint8_t* AllocateFrame(const FunctionCallbackInfo<Value>& args, size_t size) {
    uint8_t* data = static_cast<uint8_t*>(std::malloc(size ? size : 1));
    if (data != nullptr) return data;
    Isolate* isolate = args.GetIsolate();
    isolate->LowMemoryNotification();
    char message[120];
    std::snprintf(message, sizeof(message), "out of memory queueing a frame of %zu bytes; nothing was sent",
                  size);
    ThrowCodedError(AddonData::From(args), isolate->GetCurrentContext(), "ERR_PROCWIRE_OUT_OF_MEMORY",
                    message);
    return nullptr;
  }

  // Copies the first `size` bytes of `view` into a frame of its own (the
  // caller's memory is reused for the next message).
  static bool CopyFrame(const FunctionCallbackInfo<Value>& args, Local<v8::ArrayBufferView> view, size_t size,
                        EncodedFrame* frame) {
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
  static void WriteFrame(const FunctionCallbackInfo<Value>& args) {
    NativeChannel* self = Unwrap(args);
    CHECK_NOT_NULL(self);
    CHECK(args[0]->IsArrayBufferView());
    CHECK(args[1]->IsUint32());
    Local<v8::ArrayBufferView> view = args[0].As<v8::ArrayBufferView>();
    const size_t size = args[1].As<v8::Uint32>()->Value();
    CHECK(size <= view->ByteLength());
    EncodedFrame sized{nullptr, size};
    if (!self->CheckSize(args.GetIsolate()->GetCurrentContext(), sized, 0)) return;
    // Straight from the view into the ring when it takes the frame: no
    // block of its own to allocate, copy and free.
    if (self->WriteToRing(static_cast<const uint8_t*>(view->Buffer()->Data()) + view->ByteOffset(), size)) {
      args.GetReturnValue().Set(self->TotalPushed());
      return;
    }
    if (self->ShouldWriteNow(size)) {
      if (!self->WriteFrameNow(args, view, size)) return;
    } else {
      EncodedFrame frame;
      if (!CopyFrame(args, view, size, &frame)) return;
      self->Enqueue(frame);
    }
    args.GetReturnValue().Set(self->TotalPushed());
  }

  // flush() -> total bytes written so far, or -errno when the socket failed.
  static void Flush(const FunctionCallbackInfo<Value>& args) {
    NativeChannel* self = Unwrap(args);
    CHECK_NOT_NULL(self);
    const int err = self->DoFlush();
    if (err != 0) {
      args.GetReturnValue().Set(ErrnoName(args.GetIsolate(), err));
      return;
    }
    args.GetReturnValue().Set(self->TotalWritten());
  }

  // written() -> total bytes written so far (to the socket or into the
  // ring), without writing anything: what a closing channel's callbacks
  // are settled against.
  static void Written(const FunctionCallbackInfo<Value>& args) {
    NativeChannel* self = Unwrap(args);
    CHECK_NOT_NULL(self);
    args.GetReturnValue().Set(self->TotalWritten());
  }

  // enableOutOfLine(): the peer said it takes segments; large views may go
  // out of line from now on. (Until then everything goes inline, so a peer
  // without shared-memory support, such as one on the JS fallback, is never
  // sent a descriptor.)
  // acceptHandles(): descriptors that arrive with a NODE_HANDLE message are
  // handed to JavaScript (the 6th argument of onread) instead of being
  // closed. Only fork channels and named unix channels call this.
  static void AcceptHandles(const FunctionCallbackInfo<Value>& args) {
    NativeChannel* self = Unwrap(args);
    CHECK_NOT_NULL(self);
    self->inbound_.AcceptHandles();
  }

  // stageFrames(bytes): the JavaScript encoder may write the messages of a
  // tick after its first back to back into `bytes` (a Buffer the channel
  // owns for its whole life) and hand them over with writeStaged, one call
  // per batch instead of one writeFrame per message.
  static void StageFrames(const FunctionCallbackInfo<Value>& args) {
    NativeChannel* self = Unwrap(args);
    CHECK_NOT_NULL(self);
    CHECK(args[0]->IsUint8Array());
    Local<v8::Uint8Array> bytes = args[0].As<v8::Uint8Array>();
    self->stage_ref_.Reset(args.GetIsolate(), bytes);
    self->stage_ = static_cast<uint8_t*>(bytes->Buffer()->Data()) + bytes->ByteOffset();
    self->stage_capacity_ = bytes->ByteLength();
  }

  // writeStaged(length) -> total bytes ever queued: bytes [0, length) of
  // the staging buffer are whole advanced frames, each already held to
  // maxMessageSize by JavaScript. They go into the ring, and from the first
  // the ring does not take on, in order, to the socket's queue as one copied
  // block; each is counted as writeFrame counts it. The staging buffer is
  // free again on return. If that block cannot be allocated, frames before
  // it may already be in the ring, so this throws
  // ERR_PROCWIRE_OUT_OF_MEMORY and the caller closes the channel.
  static void WriteStaged(const FunctionCallbackInfo<Value>& args) {
    NativeChannel* self = Unwrap(args);
    CHECK_NOT_NULL(self);
    CHECK(args[0]->IsUint32());
    const size_t length = args[0].As<v8::Uint32>()->Value();
    CHECK_NOT_NULL(self->stage_);
    CHECK_LE(length, self->stage_capacity_);
    const uint8_t* stage = self->stage_;
    size_t at = 0;
    size_t to_socket = length;
    while (at < length) {
      CHECK_LE(kAdvancedHeaderSize, length - at);
      const size_t size = kAdvancedHeaderSize + ReadU32BigEndian(stage + at);
      CHECK_LE(size, length - at);
      if (to_socket == length) {
        if (self->WriteToRing(stage + at, size)) {
          at += size;
          continue;
        }
        to_socket = at;
      }
      self->CountSocketFrame(size);
      at += size;
    }
    if (to_socket < length) {
      uint8_t* block = AllocateFrame(args, length - to_socket);
      if (block == nullptr) return;
      std::memcpy(block, stage + to_socket, length - to_socket);
      self->queue_.Push(OutChunk{block, length - to_socket, FreeBlock, nullptr, {}});
    }
    args.GetReturnValue().Set(self->TotalPushed());
  }

  // decodeInJs(bytes, frames): from now on, small advanced frames that may
  // be plain values are left for JavaScript to decode, copied into `bytes`
  // (a Buffer) with [index, offset, length] triples in `frames` (a
  // Uint32Array), both owned by the channel and reused for every batch (see
  // onread in lib/transport/contract.js). Frames that do not fit are
  // decoded here.
  static void DecodeInJs(const FunctionCallbackInfo<Value>& args) {
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

  // enableSegmentPool(maxBytes, maxCount): the peer takes recycled segments
  // (it announced `pool`, so it also trusts future-write-sealed transfers):
  // copies go into this channel's pool of pre-faulted segments.
  static void EnableSegmentPool(const FunctionCallbackInfo<Value>& args) {
    NativeChannel* self = Unwrap(args);
    // Reachable after close (the object is gone): nothing to do then.
    if (self == nullptr) return;
    if (!args[0]->IsNumber() || !args[1]->IsNumber() || self->send_pool_ != nullptr) return;
    const double max_bytes = args[0].As<Number>()->Value();
    const double max_count = args[1].As<Number>()->Value();
    if (!(max_bytes >= 0) || !(max_count >= 0)) return;
    const size_t bytes = max_bytes >= 9e15 ? SIZE_MAX : static_cast<size_t>(max_bytes);
    self->send_pool_.reset(new SegmentPool(size_t{64} << 10, bytes));
    self->send_pool_->SetLimits(bytes, max_count >= 9e15 ? SIZE_MAX : static_cast<size_t>(max_count));
    self->trusting_peer_ = true;
  }

  // acceptSegmentPool(maxMappedBytes): we announce `pool`: the peer may
  // send recycled segments ([0xFC] control frames, at most maxMappedBytes
  // of them mapped at once) and future-write-sealed transfers.
  static void AcceptSegmentPool(const FunctionCallbackInfo<Value>& args) {
    NativeChannel* self = Unwrap(args);
    // Reachable after close (the object is gone): nothing to do then.
    if (self == nullptr) return;
    if (self->received_pool_ != nullptr || !self->ool_enabled_ || self->closing_ || !args[0]->IsNumber())
      return;
    const double max_mapped = args[0].As<Number>()->Value();
    if (!(max_mapped >= 0)) return;
    self->inbound_.AcceptPooledSegments();
    self->received_pool_.reset(new ReceivedSegmentPool(
        self->data_->isolate, self->data_->loop,
        [self](std::vector<uint32_t>& ids) { self->OnSegmentsFree(ids); },
        max_mapped >= 9e15 ? SIZE_MAX : static_cast<size_t>(max_mapped)));
  }

  // Calls visit(id) for each element of args[0], an array of segment ids
  // (1..2^32-1). Returns false when args[0] is not an array, an element is not
  // a valid id, or visit refused one; every valid id is still visited.
  template <typename Visit>
  static bool ForEachSegmentId(const FunctionCallbackInfo<Value>& args, Visit visit) {
    if (!args[0]->IsArray()) return false;
    Local<Context> context = args.GetIsolate()->GetCurrentContext();
    Local<Array> list = args[0].As<Array>();
    bool ok = true;
    for (uint32_t i = 0; i < list->Length(); i++) {
      Local<Value> item;
      if (!list->Get(context, i).ToLocal(&item)) return false;
      const double id = item->IsNumber() ? item.As<Number>()->Value() : 0;
      if (!(id >= 1 && id <= 4294967295.0) || !visit(static_cast<uint32_t>(id))) ok = false;
    }
    return ok;
  }

  // recycleSegments(ids) -> false when an id was not in flight (a confused
  // or hostile peer); the others are idle again.
  static void RecycleSegments(const FunctionCallbackInfo<Value>& args) {
    NativeChannel* self = Unwrap(args);
    // Reachable after close (the object is gone): nothing to do then.
    if (self == nullptr) return;
    bool ok = self->send_pool_ != nullptr;
    if (ok) ok = ForEachSegmentId(args, [self](uint32_t id) { return self->send_pool_->Recycle(id) >= 0; });
    args.GetReturnValue().Set(ok);
  }

  static Local<Array> IdArray(Isolate* isolate, const std::vector<uint32_t>& ids) {
    Local<Context> context = isolate->GetCurrentContext();
    Local<Array> out = Array::New(isolate, static_cast<int>(ids.size()));
    for (size_t i = 0; i < ids.size(); i++) {
      out->Set(context, static_cast<uint32_t>(i), Integer::NewFromUnsigned(isolate, ids[i])).Check();
    }
    return out;
  }

  // takeDroppedSegments() -> ids the pool destroyed since the last call
  // (the peer must be told to unmap them).
  static void TakeDroppedSegments(const FunctionCallbackInfo<Value>& args) {
    NativeChannel* self = Unwrap(args);
    // Reachable after close (the object is gone): nothing to do then.
    if (self == nullptr) return;
    std::vector<uint32_t> ids;
    if (self->send_pool_ != nullptr) ids = self->send_pool_->TakeDropped();
    args.GetReturnValue().Set(IdArray(args.GetIsolate(), ids));
  }

  // trimSegments() -> ids of every idle segment, now destroyed.
  static void TrimSegments(const FunctionCallbackInfo<Value>& args) {
    NativeChannel* self = Unwrap(args);
    // Reachable after close (the object is gone): nothing to do then.
    if (self == nullptr) return;
    std::vector<uint32_t> ids;
    if (self->send_pool_ != nullptr) {
      ids = self->send_pool_->TakeDropped();
      self->send_pool_->TrimIdle(&ids);
    }
    args.GetReturnValue().Set(IdArray(args.GetIsolate(), ids));
  }

  // forgetSegments(ids): the peer destroyed these; unknown ids are ignored.
  static void ForgetSegments(const FunctionCallbackInfo<Value>& args) {
    NativeChannel* self = Unwrap(args);
    // Reachable after close (the object is gone): nothing to do then.
    if (self == nullptr) return;
    if (self->received_pool_ == nullptr) return;
    // Unknown ids are ignored: a drop is only advice from the peer.
    ForEachSegmentId(args, [self](uint32_t id) {
      self->received_pool_->Forget(id);
      return true;
    });
  }

  // segmentPoolStats() -> [segments, bytes, in flight] of our pool, then
  // [segments, bytes] of the peer's segments we map.
  static void SegmentPoolStats(const FunctionCallbackInfo<Value>& args) {
    NativeChannel* self = Unwrap(args);
    // Reachable after close (the object is gone): nothing to do then.
    if (self == nullptr) return;
    Isolate* isolate = args.GetIsolate();
    Local<Context> context = isolate->GetCurrentContext();
    const SegmentPool* p = self->send_pool_.get();
    const ReceivedSegmentPool* r = self->received_pool_.get();
    const double v[5] = {
        p ? static_cast<double>(p->segments()) : 0, p ? static_cast<double>(p->total_bytes()) : 0,
        p ? static_cast<double>(p->in_flight()) : 0, r ? static_cast<double>(r->segments()) : 0,
        r ? static_cast<double>(r->mapped_bytes()) : 0};
    Local<Array> out = Array::New(isolate, 5);
    for (int i = 0; i < 5; i++) out->Set(context, i, Number::New(isolate, v[i])).Check();
    args.GetReturnValue().Set(out);
  }

  static void EnableOutOfLine(const FunctionCallbackInfo<Value>& args) {
    NativeChannel* self = Unwrap(args);
    CHECK_NOT_NULL(self);
    self->ool_send_ = self->ool_enabled_;
  }

  // allowRings([answer]): the peer may set up a ring towards us (a ring
  // set-up control frame is accepted). Called by channels that announce
  // `rings`; on channels that run the hello, only once it is done. With
  // answer (the server of such a channel), our own ring is set up as soon as
  // the peer's is attached, in answer to it.
  static void AllowRings(const FunctionCallbackInfo<Value>& args) {
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
  // ring_transport.h), and is woken once its own set-up brought its link. If the ring cannot be made,
  // nothing is announced and everything keeps going by the socket.
  static void EnableRings(const FunctionCallbackInfo<Value>& args) {
    NativeChannel* self = Unwrap(args);
    CHECK_NOT_NULL(self);
    self->QueueRingSetup();
    args.GetReturnValue().Set(self->TotalPushed());
  }

  // Creates our outbound ring and queues its set-up frame. False when the
  // ring already exists, the channel is ending or the ring cannot be made.
  bool QueueRingSetup() {
    if (ring_out_ready_ || ended_ || closing_) return false;
    if (rings_ == nullptr) rings_.reset(new RingTransport());
    int ring_fd = -1;
    int wake_fd = -1;
    if (rings_->CreateOutbound(kChannelRingCapacity) != 0 || rings_->DupSetupFds(&ring_fd, &wake_fd) != 0) {
      return false;
    }
    const bool json = reader_.format() == WireFormat::kJson;
    const size_t size = json ? 3 : kAdvancedHeaderSize + 2;
    uint8_t* control = static_cast<uint8_t*>(std::malloc(size));
    CHECK_NOT_NULL(control);
    if (json) {
      control[0] = kRingControlByte;
      control[1] = kRingSetupVersion;
      control[2] = '\n';
    } else {
      WriteU32BigEndian(control, 2);
      control[4] = kRingControlByte;
      control[5] = kRingSetupVersion;
    }
    queue_.Push(OutChunk{control, size, FreeBlock, nullptr, {ring_fd, wake_fd}});
    ring_out_ready_ = true;
    return true;
  }

  // setMaxMessageSize(n): the largest payload accepted from now on, applied
  // at once to a partially buffered frame too (its declared length over n
  // closes the channel with a framing error on the next read). The hello
  // runs under a small limit, so an unauthenticated peer cannot make us
  // buffer or decode more than a hello's worth.
  static void SetMaxMessageSize(const FunctionCallbackInfo<Value>& args) {
    NativeChannel* self = Unwrap(args);
    if (self == nullptr) return;
    Local<Context> context = args.GetIsolate()->GetCurrentContext();
    if (!args[0]->IsNumber() || !(args[0].As<Number>()->Value() >= 0)) {
      ThrowCodedError(self->data_, context, "ERR_PROCWIRE_INVALID_ARG",
                      "maxMessageSize must be a non-negative number");
      return;
    }
    const double max = args[0].As<Number>()->Value();
    const size_t limit = max >= 18446744073709551615.0 ? SIZE_MAX : static_cast<size_t>(max);
    self->ring_frames_.SetMaxPayloadSize(limit);
    const FramingError e = self->reader_.SetMaxPayloadSize(limit);
    // false: a frame already buffered is over the new limit and the stream
    // can no longer be framed; the caller closes the channel (a later read
    // would report the same framing error).
    args.GetReturnValue().Set(e == FramingError::kNone);
  }

  static void ReadStart(const FunctionCallbackInfo<Value>& args) {
    NativeChannel* self = Unwrap(args);
    CHECK_NOT_NULL(self);
    self->reading_ = !self->ended_;
    self->UpdatePoll();
    // Ring records that arrived while paused were not read: look again.
    if (self->reading_ && self->rings_ != nullptr && self->rings_->has_inbound()) {
      self->rings_->WakeSelf();
    }
  }
  static void ReadStop(const FunctionCallbackInfo<Value>& args) {
    NativeChannel* self = Unwrap(args);
    CHECK_NOT_NULL(self);
    self->reading_ = false;
    self->UpdatePoll();
  }

  // stats() -> one array of doubles in the layout of src/core/channel_stats.h
  // (exported as binding.statsLayout).
  static void Stats(const FunctionCallbackInfo<Value>& args) {
    static_assert(stats::kHistogramBuckets == kHistogramBuckets, "one histogram size");
    NativeChannel* self = Unwrap(args);
    CHECK_NOT_NULL(self);
    Isolate* isolate = args.GetIsolate();
    Local<Context> context = isolate->GetCurrentContext();
    const Counters& c = self->counters_;
    double v[stats::kCount] = {};
    v[stats::kMessagesIn] = c.messages_in;
    v[stats::kMessagesOut] = c.messages_out;
    v[stats::kBytesIn] = c.bytes_in;
    v[stats::kBytesOut] = self->TotalWritten();
    v[stats::kQueuedBytes] = static_cast<double>(self->queue_.queued_bytes());
    v[stats::kWriteCalls] = static_cast<double>(self->queue_.write_calls());
    v[stats::kReadCalls] = c.read_calls;
    v[stats::kDecodeErrors] = c.decode_errors;
    v[stats::kBufferedBytes] = static_cast<double>(self->reader_.buffered());
    for (int i = 0; i < stats::kHistogramBuckets; i++) {
      v[stats::kHistogramIn + i] = c.histogram_in[i];
      v[stats::kHistogramOut + i] = c.histogram_out[i];
    }
    v[stats::kOutOfLineMessagesOut] = c.ool_messages_out;
    v[stats::kOutOfLineBytesOut] = c.ool_bytes_out;
    v[stats::kOutOfLineMessagesIn] = c.ool_messages_in;
    v[stats::kOutOfLineBytesIn] = c.ool_bytes_in;
    const bool rings_on = self->ring_out_ready_ && self->rings_ != nullptr && self->rings_->has_inbound();
    v[stats::kRingsEnabled] = rings_on ? 1.0 : 0.0;
    v[stats::kRingMessagesOut] = self->rings_ != nullptr ? self->rings_->messages_out : 0.0;
    v[stats::kRingMessagesIn] = self->rings_ != nullptr ? self->rings_->messages_in : 0.0;
    Local<Array> out = Array::New(isolate, stats::kCount);
    for (int i = 0; i < stats::kCount; i++) out->Set(context, i, Number::New(isolate, v[i])).Check();
    args.GetReturnValue().Set(out);
  }

  static void Fd(const FunctionCallbackInfo<Value>& args) {
    NativeChannel* self = Unwrap(args);
    CHECK_NOT_NULL(self);
    args.GetReturnValue().Set(self->fd_);
  }

  uv_handle_t* ref_handle() override { return reinterpret_cast<uv_handle_t*>(&poll_); }

  void ReleaseV8Handles() override {
    if (block_ != nullptr) block_->ReleaseArrayBuffer();
    on_read_.Reset();
    on_write_.Reset();
    on_end_.Reset();
    on_connect_.Reset();
    on_segment_return_.Reset();
    shared_counters_.Reset();
    shared_ = nullptr;
    js_decode_ = false;
    js_bytes_ref_.Reset();
    js_frames_ref_.Reset();
    js_bytes_ = nullptr;
    js_frames_ = nullptr;
    stage_ref_.Reset();
    stage_ = nullptr;
  }

 private:
  static Local<Function> GetFunction(Local<Context> context, Local<Object> from, const char* name) {
    Local<Value> v = from->Get(context, OneByteString(Isolate::GetCurrent(), name)).ToLocalChecked();
    CHECK(v->IsFunction());
    return v.As<Function>();
  }

  // The sender's side of maxMessageSize: a message whose payload (inline
  // bytes plus its segments) is over the limit is refused before a byte is
  // queued, so the peer never sees a frame it would have to reject.
  bool CheckSize(Local<Context> context, EncodedFrame& frame, size_t segment_bytes) {
    const size_t header = reader_.format() == WireFormat::kAdvanced ? kAdvancedHeaderSize : 1;
    const size_t payload = frame.size >= header ? frame.size - header : 0;
    const size_t max = reader_.max_payload_size();
    if (payload <= max && segment_bytes <= max - payload) return true;
    std::free(frame.data);
    frame.data = nullptr;
    char message[160];
    std::snprintf(message, sizeof(message),
                  "message of %llu bytes exceeds maxMessageSize (%llu bytes); nothing was sent",
                  static_cast<unsigned long long>(payload + segment_bytes),
                  static_cast<unsigned long long>(max));
    ThrowCodedError(data_, context, "ERR_PROCWIRE_MESSAGE_TOO_LARGE", message);
    return false;
  }

  // Puts one frame in the ring, counted as sent, when the ring takes it:
  // only while nothing waits for the socket, so the frame is also
  // "written" in byte order, which keeps the monotonic byte counts (and
  // send callbacks) true. The record's mark is the socket bytes queued so
  // far, which orders it against them. The caller keeps `data`.
  bool WriteToRing(const uint8_t* data, size_t size) {
    if (!ring_out_ready_ || !queue_.empty() || connecting_) return false;
    if (!rings_->Write(queue_.total_pushed(), data, size)) {
      if (rings_->outbound_failed()) OutboundRingFailed();
      return false;
    }
    ring_user_bytes_ += static_cast<double>(size);
    counters_.messages_out++;
    counters_.histogram_out[SizeBucket(size)]++;
    return true;
  }

  // Counts a frame bound for the socket. The first large one widens the
  // socket's send buffer (see kWidenSendBufferFrame).
  void CountSocketFrame(size_t size) {
    counters_.messages_out++;
    counters_.histogram_out[SizeBucket(size)]++;
    if (size >= kWidenSendBufferFrame && !send_buffer_widened_) {
      send_buffer_widened_ = true;
      WidenUnixSendBuffer(fd_);
    }
  }

  void Enqueue(const EncodedFrame& frame) {
    if (WriteToRing(frame.data, frame.size)) {
      std::free(frame.data);
      return;
    }
    CountSocketFrame(frame.size);
    // Written at once when ShouldWriteNow says so; whatever the socket did
    // not take is queued.
    if (ShouldWriteNow(frame.size)) {
      const size_t written = queue_.TryWrite(fd_, frame.data, frame.size);
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
    if (frame.size >= kWriteGatheredMinFrame) WriteOutGathered();
  }

  // Large frames a tick gathered for its flush go out within send() once
  // they add up to kWriteNowThreshold, so the peer starts on them while this
  // side works on the rest of the tick. A plain Node child echoing 16 KiB
  // json messages, 256 in flight, otherwise waited with an empty socket
  // while its procwire parent answered a whole read's worth (16 of them):
  // 25.7–26.8k round trips/s before, 27.2–28.4k after (three runs each),
  // 29.7k with Node's own parent. Small frames still wait for the tick's
  // one writev: written out every 64 KiB, 1 KiB json answers cost the child
  // 5%. Nothing is settled here; a failed write stays for the tick's flush
  // to report, outside send().
  void WriteOutGathered() {
    if (connecting_ || closing_ || want_write_ || queue_.queued_bytes() < kWriteNowThreshold) return;
    int err = 0;
    if (queue_.Flush(fd_, &err) == WriteQueue::FlushStatus::kWouldBlock) {
      want_write_ = true;
      UpdatePoll();
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
  bool ShouldWriteNow(size_t size) {
    if (connecting_ || closing_ || !queue_.empty()) return false;
    if (ring_out_ready_ && size <= rings_->max_frame_bytes()) return false;
    if (size < kWriteNowThreshold && wrote_since_flush_) return false;
    wrote_since_flush_ = true;
    return true;
  }

  // A frame goes to the socket at once, as libuv's uv_try_write does: the
  // bytes the socket takes need no copy, and the peer starts reading them
  // before this tick ends. The rest is copied and queued. Its memory
  // is allocated before anything is written, so running out of memory still
  // sends nothing; a failed write is left for the next flush to report,
  // outside send(). Returns false after throwing.
  bool WriteFrameNow(const FunctionCallbackInfo<Value>& args, Local<v8::ArrayBufferView> view, size_t size) {
    uint8_t* block = AllocateFrame(args, size);
    if (block == nullptr) return false;
    const uint8_t* bytes = static_cast<const uint8_t*>(view->Buffer()->Data()) + view->ByteOffset();
    CountSocketFrame(size);
    const size_t written = queue_.TryWrite(fd_, bytes, size);
    if (written == size) {
      std::free(block);
      return true;
    }
    // Only the pages of the part still to send are touched.
    std::memcpy(block + written, bytes + written, size - written);
    queue_.Push(OutChunk{block + written, size - written, FreeHintBlock, block, {}});
    return true;
  }

  // The peer moved the read index of our ring to an impossible place. The
  // frame at hand (and any after it) goes by the socket, so nothing is
  // lost or reordered, and the channel is closed with
  // ERR_PROCWIRE_RING_CORRUPT from the ring's poll handle, outside this send.
  void OutboundRingFailed() {
    if (rings_->corrupt_reason() != nullptr) return;
    rings_->SetCorrupt("the peer moved the read index of our ring to an impossible place");
    if (ring_poll_started_) rings_->WakeSelf();
  }

  // Monotonic byte counts over both ways out (see Write and Flush).
  double TotalPushed() const { return ring_user_bytes_ + static_cast<double>(queue_.total_pushed()); }
  double TotalWritten() const { return ring_user_bytes_ + static_cast<double>(queue_.total_written()); }

  // Returns 0 or an errno.
  int DoFlush() {
    wrote_since_flush_ = false;
    if (connecting_ || closing_) return 0;
    // One wake-up per batch of ring records, and only for a sleeping reader.
    if (ring_out_ready_) rings_->WakeReaderIfNeeded();
    int err = 0;
    switch (queue_.Flush(fd_, &err)) {
      case WriteQueue::FlushStatus::kDrained:
        want_write_ = false;
        break;
      case WriteQueue::FlushStatus::kWouldBlock:
        want_write_ = true;
        break;
      case WriteQueue::FlushStatus::kError:
        want_write_ = false;
        UpdatePoll();
        return err;
    }
    UpdatePoll();
    return 0;
  }

  void UpdatePoll() {
    if (closing_) return;
    int events = 0;
    if (connecting_) {
      events = UV_WRITABLE;
    } else {
      if (reading_) events |= UV_READABLE | UV_DISCONNECT;
      // Paused by the user (not ended): the poll stays active watching for
      // the peer's hang-up only, so a paused channel keeps the process
      // alive exactly as a reading one does (the ref policy decides).
      if (!reading_ && !ended_ && !peer_hung_up_) events |= UV_DISCONNECT;
      if (want_write_) events |= UV_WRITABLE;
    }
    if (events == poll_events_) return;
    poll_events_ = events;
    if (events == 0) {
      uv_poll_stop(&poll_);
    } else {
      CHECK_EQ(uv_poll_start(&poll_, events, OnPoll), 0);
    }
  }

  static void OnPoll(uv_poll_t* handle, int status, int events) {
    NativeChannel* self = FromUvHandle<NativeChannel>(handle->data);
    if (self->closing_) return;
    Isolate* isolate = self->data_->isolate;
    HandleScope scope(isolate);
    Local<Context> context = self->context_.Get(isolate);
    Context::Scope context_scope(context);
    if (status < 0) {
      // libuv turns POLLERR into UV_EBADF and stops the watcher. The socket
      // may still hold data the peer sent before it failed: read that first,
      // then report the socket's real error (ECONNRESET, EPIPE, ...).
      self->poll_events_ = 0;
      const int so_error = SocketError(self->fd_);
      if (self->reading_ && !self->connecting_) self->OnReadable(context);
      if (self->closing_) return;
      if (self->connecting_) {
        // SO_ERROR was consumed above; a failed connect reports it here.
        self->connecting_ = false;
        self->End(EndReason::kSystemError, Local<Value>(), so_error != 0 ? -so_error : ECONNREFUSED);
        return;
      }
      if ((so_error == 0 || so_error == -ECONNRESET) && self->reader_.buffered() > 0) {
        self->EndTruncated(context);
        return;
      }
      if (so_error == 0) {
        self->End(EndReason::kEndOfStream, Local<Value>());
      } else {
        self->End(EndReason::kSystemError, Local<Value>(), -so_error);
      }
      return;
    }
    if (self->connecting_) {
      if (events & (UV_WRITABLE | UV_DISCONNECT)) self->FinishConnect();
      return;
    }
    if (events & UV_WRITABLE) {
      const int err = self->DoFlush();
      if (self->closing_) return;
      if (err != 0) {
        // A peer that wrote and then hung up: what it wrote is still in
        // our socket, ahead of its end, and Node's channel reads it all
        // before it disconnects. So a reading channel leaves the close to
        // the read side, which delivers those messages and then sees the
        // end (as Channel._peerGoneWhileReading does for flushes that
        // JavaScript starts); the failed write stops watching for
        // writability (DoFlush), so this does not spin.
        if ((err == EPIPE || err == ECONNRESET) && self->reading_) {
          self->OnReadable(context);
          return;
        }
        self->End(EndReason::kSystemError, Local<Value>(), err);
        return;
      }
      Local<Value> argv[] = {Number::New(isolate, self->TotalWritten())};
      self->Call(self->on_write_, 1, argv);
      if (self->closing_) return;
    }
    if ((events & (UV_READABLE | UV_DISCONNECT)) && self->reading_) {
      self->OnReadable(context);
    } else if ((events & UV_DISCONNECT) && !self->reading_) {
      // The peer hung up while we are paused: the data before its hang-up
      // is read (and the end seen) on resume; until then stop watching, as
      // the condition is level-triggered and would wake us in a loop.
      self->peer_hung_up_ = true;
      self->UpdatePoll();
    }
  }

  // After the socket brought messages, the event loop polls without
  // sleeping for a moment (an idle handle makes libuv's poll timeout 0), so
  // that the peer's next write finds this process running. Waking a process
  // that sleeps costs the writer's CPU several microseconds of kernel time
  // on a virtual machine; a plain Node child whose every answer woke its
  // procwire parent spent about a third more system time per message than
  // with Node's own (busier) parent, and was slower for it.
  //
  // The spin pays only while the next message usually comes within a
  // short window: each spin (up to kSocketSpinNs) either catches a message
  // or misses, and the running hit rate (SpinHitRate, src/core/ring.h)
  // decides, so messages 100 µs apart cost one missed probe per 32 messages
  // rather than a spin after each. An idle channel never spins.
  // The handle is unref'd (it never keeps the process alive), and each turn
  // yields the CPU to any other runnable thread; a yield that gave the CPU
  // away ends the spin as a miss. Only a thread's single channel spins: a
  // master with several busy workers (more runnable processes than CPUs)
  // lost about a tenth of its pairs/s to the time its spin took from them.
  void StartSocketSpin() {
    socket_drained_ns_ = MonotonicNs();
    if (data_->open_channels != 1 || !socket_spin_rate_.ShouldSpin()) {
      if (socket_spin_active_) StopSocketSpin();
      return;
    }
    if (socket_spin_active_) return;
    if (!socket_spin_inited_) {
      CHECK_EQ(uv_idle_init(data_->loop, &socket_spin_), 0);
      AttachUvHandle(reinterpret_cast<uv_handle_t*>(&socket_spin_));
      uv_unref(reinterpret_cast<uv_handle_t*>(&socket_spin_));
      socket_spin_inited_ = true;
    }
    socket_spin_active_ = true;
    CHECK_EQ(uv_idle_start(&socket_spin_, OnSocketSpin), 0);
  }

  void StopSocketSpin() {
    uv_idle_stop(&socket_spin_);
    socket_spin_active_ = false;
  }

  // One turn of the event loop while spinning: the loop itself polled the
  // socket (with a zero timeout) just before.
  static void OnSocketSpin(uv_idle_t* handle) {
    NativeChannel* self = FromUvHandle<NativeChannel>(handle->data);
    if (self->closing_ || self->ended_ || !self->reading_) {
      self->StopSocketSpin();
      return;
    }
    if (MonotonicNs() - self->socket_drained_ns_ > kSocketSpinNs) {
      // Nothing came within the window.
      self->StopSocketSpin();
      self->socket_spin_rate_.Missed();
      return;
    }
    const uint64_t before = MonotonicNs();
    sched_yield();
    if (MonotonicNs() - before > kSpinYieldContendedNs) {
      // Another thread had this CPU meanwhile: with more runnable threads
      // than CPUs a spin takes time the others need. It stops, as a miss
      // (a virtual CPU that was briefly descheduled looks the same, so one
      // such yield must not shut the window for long).
      self->StopSocketSpin();
      self->socket_spin_rate_.Missed();
    }
  }

  void FinishConnect() {
    const int err = SocketError(fd_);
    connecting_ = false;
    if (err != 0) {
      End(EndReason::kSystemError, Local<Value>(), -err);
      return;
    }
    UpdatePoll();
    Isolate* isolate = data_->isolate;
    Local<Value> argv[] = {v8::Undefined(isolate)};
    Call(on_connect_, 0, argv);
    if (closing_) return;
    // Sends made while connecting go out now.
    const int werr = DoFlush();
    if (werr != 0) End(EndReason::kSystemError, Local<Value>(), werr);
  }

  // Allocation failure anywhere in the read path (the read block, the
  // reassembly buffer, V8's own allocations that throw) closes this channel
  // with ERR_PROCWIRE_OUT_OF_MEMORY instead of aborting the process.
  void OnReadable(Local<Context> context) {
    try {
      ReadAll(context);
    } catch (const std::bad_alloc&) {
      if (closing_ || ended_) return;
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
  void ReadAll(Local<Context> context) {
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
      const bool large_frames =
          last_socket_frame_size_ >= kLargeFrameSize && last_socket_frame_size_ < kLargeFrameLimit;
      if (large_frames && i > 0) {
        EmitBatch(messages, errors, handle_fds);
        messages.clear();
        errors.clear();
        handle_fds.clear();
        if (closing_) return;
        // JavaScript paused or ended the channel: the rest of the socket
        // waits.
        if (!reading_ || ended_) break;
      }
      const size_t read_size = large_frames ? kLargeFrameReadSize : kReadBufferSize;
      FrameReader::Tail tail = reader_.WritableTail();
      ReadOutcome r;
      if (tail.size >= kDirectReadThreshold) {
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
          if (fe != FramingError::kNone) break;                 // reported below
          if (static_cast<size_t>(r.bytes) < read_size) break;  // socket drained
          continue;
        }
      }
      if (r.bytes == 0) {
        open = false;
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
      reason = reader_.error() == FramingError::kOutOfMemory ? EndReason::kOutOfMemory
                                                             : EndReason::kMessageTooLarge;
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
        (reason == EndReason::kEndOfStream ||
         (reason == EndReason::kSystemError && sys_error == ECONNRESET))) {
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
    if (delivered && open && !ring_poll_started_) StartSocketSpin();
    // Our ring's set-up, queued in answer to the peer's, goes out now.
    if (ring_setup_unflushed_ && open && !ended_) {
      ring_setup_unflushed_ = false;
      const int err = DoFlush();
      if (closing_) return;
      if (err != 0) {
        End(EndReason::kSystemError, Local<Value>(), err);
        return;
      }
    }
    if (open) return;
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

  void StartBatch() {
    js_bytes_used_ = 0;
    js_frames_used_ = 0;
  }

  // Hands one batch of decoded messages to JavaScript.
  void EmitBatch(std::vector<Local<Value>>& messages, std::vector<Local<Value>>& errors,
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

  void EndRingCorrupt(Local<Context> context) {
    Local<Value> err;
    char message[200];
    std::snprintf(message, sizeof(message),
                  "the shared-memory ring from the peer is corrupt: %s; the channel was closed",
                  rings_->corrupt_reason());
    if (!MakeCodedError(data_, context, "ERR_PROCWIRE_RING_CORRUPT", message).ToLocal(&err)) return;
    End(EndReason::kRingCorrupt, err);
  }

  // A socket frame starting at socket offset X comes after every ring record
  // marked <= X (see ring_transport.h).
  void DeliverSocketFrame(Local<Context> context, ReadBlock* block, const FrameReader::Frame& frame,
                          std::vector<Local<Value>>* messages, std::vector<Local<Value>>* errors,
                          std::vector<Local<Value>>* handle_fds, v8::TryCatch* try_catch) {
    const uint64_t start = socket_framed_;
    last_socket_frame_size_ = frame.size;
    socket_framed_ += frame.size + (reader_.format() == WireFormat::kAdvanced ? kAdvancedHeaderSize : 1);
    if (rings_ != nullptr && rings_->has_inbound())
      DrainRing(context, messages, errors, handle_fds, try_catch, start);
    DeliverFrame(context, block, frame, Inbound::Source::kSocket, messages, errors, handle_fds, try_catch);
  }

  // How a DrainRing call ended.
  enum class RingDrain : uint8_t {
    kEmpty,     // The ring is empty; sleep was not announced (announce false).
    kSleeping,  // The ring is empty and sleep is announced.
    kWaiting,   // A record waits for socket bytes not read yet.
    kMore,      // The batch budget is spent; our wake-up link is signalled.
    kCorrupt,   // The peer broke the ring (corrupt_reason()).
  };

  // A ring set-up frame [0xFD][2] brought the peer's ring (memfd) and the
  // signalling end of its wake-up link, which this takes over; we poll a
  // link of our own (see ring_transport.h).
  void TakeRing(int ring_fd, int wake_fd) {
    if (rings_ == nullptr) rings_.reset(new RingTransport());
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
  RingDrain DrainRing(Local<Context> context, std::vector<Local<Value>>* messages,
                      std::vector<Local<Value>>* errors, std::vector<Local<Value>>* handle_fds,
                      v8::TryCatch* try_catch, uint64_t limit = UINT64_MAX, bool announce = true) {
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
        case RingTransport::ReadStatus::kRecord: {
          counters_.bytes_in += static_cast<double>(size);
          const FramingError fe = ring_frames_.Push(frames, size, [&](const FrameReader::Frame& f) {
            rings_->messages_in++;
            DeliverFrame(context, nullptr, f, Inbound::Source::kRing, messages, errors, handle_fds,
                         try_catch);
          });
          if (fe != FramingError::kNone || ring_frames_.buffered() != 0) {
            rings_->SetCorrupt(fe == FramingError::kMessageTooLarge
                                   ? "a ring frame exceeds maxMessageSize"
                                   : "a ring record does not hold whole frames");
            return RingDrain::kCorrupt;
          }
          continue;
        }
        case RingTransport::ReadStatus::kEmpty:
          if (!announce) return RingDrain::kEmpty;
          if (rings_->PrepareToSleep()) return RingDrain::kSleeping;
          continue;
        case RingTransport::ReadStatus::kWaiting:
          return RingDrain::kWaiting;
        case RingTransport::ReadStatus::kCorrupt:
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
  static void OnRingPoll(uv_poll_t* handle, int status, int events) {
    NativeChannel* self = FromUvHandle<NativeChannel>(handle->data);
    if (self->closing_ || self->ended_) return;
    RingTransport* rings = self->rings_.get();
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
      if (self->closing_ || self->ended_) return;
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

  void EndTruncated(Local<Context> context) {
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
  void DeliverFrame(Local<Context> context, ReadBlock* block, const FrameReader::Frame& frame,
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
        if (rings_ == nullptr) rings_.reset(new RingTransport());
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
  bool TakeForJs(const FrameReader::Frame& frame, size_t index) {
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
  bool IsHandleMessage(Local<Context> context, Local<Value> value) {
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

  // Maps the segments announced for a message (descriptors it owns, closed
  // here): each is checked (memfd, sealed against writes, shrinking and
  // growing) and mapped privately. Returns why they failed, or nullptr;
  // after a failure the rest are only closed and segments is left empty.
  const char* MapSegments(Isolate* isolate, std::vector<int>* fds, InSegments* segments) {
    const char* bad = nullptr;
    size_t message_bytes = 0;
    for (int fd : *fds) {
      int error = 0;
      Local<ArrayBuffer> ab;
      taken_segments_++;
      // One message's segments together are held to maxMessageSize, as
      // its inline bytes are; each is checked before it is mapped.
      const size_t max = reader_.max_payload_size();
      // A peer that takes recycled segments trusts ours, so it also takes
      // transfers sealed only against future writers.
      if (bad == nullptr &&
          MapReceivedSegment(isolate, fd, max - message_bytes, &error, received_pool_ != nullptr)
              .ToLocal(&ab)) {
        message_bytes += ab->ByteLength();
        counters_.ool_bytes_in += static_cast<double>(ab->ByteLength());
        taken_segment_bytes_ += static_cast<double>(ab->ByteLength());
        segments->buffers.push_back(ab);
      } else {
        // Acknowledged though refused (or skipped after a refusal), so the
        // sender's count of shared memory in flight still comes down.
        taken_segment_bytes_ += static_cast<double>(RefusedSegmentBytes(fd));
        if (bad == nullptr) {
          bad = error == EPERM
                    ? "a received segment is not a sealed memfd (write, shrink and grow seals required)"
                : error == EFBIG ? "a received segment is larger than maxMessageSize"
                                 : "a received segment could not be mapped";
          segments->buffers.clear();
        }
      }
      CloseFd(fd);
    }
    fds->clear();
    return bad;
  }

  // The segments of a message announced by [0xFC] (docs/protocol.md): one
  // entry each, some recycled; fds hold the descriptors of the sealed and
  // new recycled ones, in entry order (owned here, closed here). Every
  // recycled segment named is taken, even after an earlier entry failed, so
  // that it goes back to the sender once unused. Returns why the message's
  // segments failed, or nullptr.
  const char* TakePooledSegments(Isolate* isolate, const std::vector<SegmentEntry>& entries,
                                 std::vector<int>* fds, InSegments* segments) {
    const char* bad = nullptr;
    const size_t max = reader_.max_payload_size();
    size_t message_bytes = 0;
    size_t next_fd = 0;
    for (const SegmentEntry& e : entries) {
      int fd = -1;
      if (e.kind != protocol::kSegmentPooled && next_fd < fds->size()) fd = (*fds)[next_fd++];
      taken_segments_++;
      int error = 0;
      Local<ArrayBuffer> ab;
      bool ok;
      if (e.kind == protocol::kSegmentSealed) {
        ok = bad == nullptr && fd >= 0 &&
             MapReceivedSegment(isolate, fd, max - message_bytes, &error, /*accept_future_write=*/true)
                 .ToLocal(&ab);
      } else {
        ok = received_pool_ != nullptr;
        if (ok && e.kind == protocol::kSegmentPooledNew) {
          // Segments come in power-of-two classes: one may be up to twice
          // the largest message it can hold.
          const size_t max_segment = max > SIZE_MAX / 2 ? SIZE_MAX : 2 * max;
          const int r = e.id == 0 || fd < 0 ? -EINVAL : received_pool_->Add(e.id, fd, max_segment);
          if (r < 0) {
            ok = false;
            error = -r;
          }
        }
        if (ok) ok = received_pool_->Take(e.id, e.length, &error).ToLocal(&ab);
        if (ok && (bad != nullptr || e.length > max - message_bytes)) {
          // Taken only to be handed back once collected.
          if (bad == nullptr) error = EFBIG;
          ok = false;
        }
      }
      if (!ok) {
        // Acknowledged though refused, as in MapSegments: a sealed segment
        // by its size, a recycled one by the length the sender counted.
        taken_segment_bytes_ +=
            static_cast<double>(e.kind == protocol::kSegmentSealed ? RefusedSegmentBytes(fd) : e.length);
      }
      if (fd >= 0) CloseFd(fd);
      if (ok) {
        message_bytes += ab->ByteLength();
        counters_.ool_bytes_in += static_cast<double>(ab->ByteLength());
        taken_segment_bytes_ += static_cast<double>(ab->ByteLength());
        segments->buffers.push_back(ab);
      } else if (bad == nullptr) {
        bad = error == EPERM    ? "a received segment is not a memfd with the required seals"
              : error == EFBIG  ? "a received segment is larger than maxMessageSize"
              : error == EEXIST ? "a new recycled segment reuses an id already mapped"
              : error == ENOENT ? "a recycled segment id that was never announced"
              : error == EINVAL ? "a recycled segment with id 0"
              : error == ENOSPC ? "the peer's recycled segments exceed what this end maps at once"
                                : "a received segment could not be mapped";
        segments->buffers.clear();
      }
    }
    for (size_t i = next_fd; i < fds->size(); i++) CloseFd((*fds)[i]);
    fds->clear();
    return bad;
  }

  // Recycled segments whose ArrayBuffers V8 freed: JavaScript hands them
  // back to the peer. Runs from the pool's async handle, on the loop.
  void OnSegmentsFree(std::vector<uint32_t>& ids) {
    if (closing_ || ended_ || teardown_ || on_segment_return_.IsEmpty()) return;
    Isolate* isolate = data_->isolate;
    HandleScope scope(isolate);
    Local<Context> context = context_.Get(isolate);
    Context::Scope context_scope(context);
    Local<Value> argv[] = {IdArray(isolate, ids)};
    Call(on_segment_return_, 1, argv);
  }

  // The stream ended, once: onend(reason name, coded error or undefined,
  // errno name or undefined). sys_error: the errno of kSystemError.
  void End(EndReason reason, Local<Value> err, int sys_error = 0) {
    if (ended_) return;
    ended_ = true;
    reading_ = false;
    want_write_ = false;
    UpdatePoll();
    Isolate* isolate = data_->isolate;
    Local<Value> argv[] = {
        OneByteString(isolate, EndReasonName(reason)),
        err.IsEmpty() ? Local<Value>(v8::Undefined(isolate)) : err,
        sys_error != 0 ? Local<Value>(ErrnoName(isolate, sys_error)) : Local<Value>(v8::Undefined(isolate))};
    Call(on_end_, 3, argv);
  }

  // The socket's poll handle and, with rings, the wake-up link's: the object
  // goes when the last has closed.
  void CloseUvHandles() override {
    // No more returns: the pool's async handle closes, and the mappings
    // stay only as long as received Buffers use them.
    if (received_pool_ != nullptr) received_pool_->Close();
    data_->open_channels--;
    uv_poll_stop(&poll_);
    uv_close(reinterpret_cast<uv_handle_t*>(&poll_), OnUvHandleClosed);
    if (socket_spin_inited_) {
      uv_idle_stop(&socket_spin_);
      uv_close(reinterpret_cast<uv_handle_t*>(&socket_spin_), OnUvHandleClosed);
    }
    if (ring_poll_started_) {
      uv_poll_stop(&ring_poll_);
      uv_close(reinterpret_cast<uv_handle_t*>(&ring_poll_), OnUvHandleClosed);
      auto& readers = data_->ring_readers;
      readers.erase(std::remove(readers.begin(), readers.end(), this), readers.end());
    }
  }

  bool RingRecordsWaiting() const override {
    return reading_ && !closing_ && !ended_ && rings_->InboundMaybeReady();
  }

  // Whether another channel of this thread has ring records waiting (see
  // LoopRingReader). At most kMaxRingPeersChecked are looked at per call, so a
  // process with thousands of channels does not make each spin step long.
  bool OtherRingHasRecords() const {
    const auto& readers = data_->ring_readers;
    const size_t n = readers.size() < kMaxRingPeersChecked ? readers.size() : kMaxRingPeersChecked;
    for (size_t i = 0; i < n; i++) {
      if (readers[i] != this && readers[i]->RingRecordsWaiting()) return true;
    }
    return false;
  }

  ~NativeChannel() override {
    CloseFd(fd_);
    queue_.Clear();
    delete block_;
  }

  int fd_;
  FrameReader reader_;
  // Frames from ring records, which hold whole frames only.
  FrameReader ring_frames_;
  WriteQueue queue_;
  // Shared-memory rings with a procwire peer on this host (see
  // ring_transport.h); null until either side sets one up.
  std::unique_ptr<RingTransport> rings_;
  // Our ring is set up in answer to the peer's (the server of a channel
  // that ran the hello), and that set-up frame still needs a flush.
  bool rings_answer_ = false;
  bool ring_setup_unflushed_ = false;
  // Our ring's set-up frame is queued: frames may take our ring.
  bool ring_out_ready_ = false;
  // Bytes of whole socket frames framed so far, the reader's side of the
  // ring records' socket marks.
  uint64_t socket_framed_ = 0;
  // Frame bytes that went by the ring (they count as written at once).
  double ring_user_bytes_ = 0;
  uv_poll_t ring_poll_;
  bool ring_poll_started_ = false;
  // Keeps the event loop polling without sleeping for a moment after the
  // socket brought messages (see StartSocketSpin).
  uv_idle_t socket_spin_;
  bool socket_spin_inited_ = false;
  bool socket_spin_active_ = false;
  // When the socket was last drained, and whether to spin after a read.
  uint64_t socket_drained_ns_ = 0;
  SpinHitRate socket_spin_rate_;
  ReadBlock* block_ = nullptr;
  uv_poll_t poll_;
  int poll_events_ = 0;
  bool connecting_;
  bool reading_ = true;
  // The size of the last frame read from the socket: whether the peer sends
  // large frames (see kLargeFrameSize and kLargeFrameLimit).
  size_t last_socket_frame_size_ = 0;
  // Whether a large frame widened the socket's send buffer (CountSocketFrame).
  bool send_buffer_widened_ = false;
  bool want_write_ = false;
  // A message was written within send() since the last flush (see
  // ShouldWriteNow).
  bool wrote_since_flush_ = false;
  bool ended_ = false;
  Counters counters_;
  // Out-of-line receiving (procwire peers on unix sockets), and sending,
  // which waits for the peer to say it can receive.
  bool ool_enabled_;
  bool ool_send_ = false;
  size_t ool_threshold_;
  // Received descriptors and the control frames that claim them.
  Inbound inbound_;
  // The peer hung up while reads were paused (see OnPoll).
  bool peer_hung_up_ = false;
  // Frame bytes delivered in the current batch (see ReadAll).
  double frame_bytes_ = 0;
  // Small frames of the batch being assembled that JavaScript decodes
  // (decodeInJs): their payloads back to back, and per frame its index in
  // the batch's messages, offset and length. Cleared when a batch starts
  // and handed over by EmitBatch.
  bool js_decode_ = false;
  v8::Global<v8::Uint8Array> js_bytes_ref_;
  v8::Global<v8::Uint32Array> js_frames_ref_;
  uint8_t* js_bytes_ = nullptr;
  size_t js_bytes_capacity_ = 0;
  size_t js_bytes_used_ = 0;
  uint32_t* js_frames_ = nullptr;
  size_t js_frames_capacity_ = 0;
  size_t js_frames_used_ = 0;
  // The staging buffer of stageFrames, the channel's for its whole life;
  // JavaScript writes it, and it is read only within writeStaged.
  v8::Global<v8::Uint8Array> stage_ref_;
  uint8_t* stage_ = nullptr;
  size_t stage_capacity_ = 0;
  double taken_segments_ = 0;
  double taken_segment_bytes_ = 0;
  // Recycled segments: our pool (the peer takes them) and the peer's
  // segments we map (we announced `pool`); see src/binding/segments.h.
  std::unique_ptr<SegmentPool> send_pool_;
  std::unique_ptr<ReceivedSegmentPool> received_pool_;
  // The peer announced `pool`: transfers to it are sealed future-write.
  bool trusting_peer_ = false;
  Global<Function> on_segment_return_;
  // Optional counters shared with JavaScript (see New).
  Global<v8::Float64Array> shared_counters_;
  double* shared_ = nullptr;
  Global<Function> on_read_, on_write_, on_end_, on_connect_;
};

}  // namespace

void InitNativeChannel(AddonData* data, Local<Context> context, Local<Object> exports) {
  Isolate* isolate = data->isolate;
  Local<v8::External> external = v8::External::New(isolate, data);

  Local<FunctionTemplate> ch = FunctionTemplate::New(isolate, NativeChannel::New, external);
  ch->SetClassName(OneByteString(isolate, "NativeChannel"));
  ch->InstanceTemplate()->SetInternalFieldCount(1);
  SetMethod(isolate, ch, external, "write", NativeChannel::Write);
  SetMethod(isolate, ch, external, "writeBuffer", NativeChannel::WriteBuffer);
  SetMethod(isolate, ch, external, "writeFrame", NativeChannel::WriteFrame);
  SetMethod(isolate, ch, external, "stageFrames", NativeChannel::StageFrames);
  SetMethod(isolate, ch, external, "writeStaged", NativeChannel::WriteStaged);
  SetMethod(isolate, ch, external, "flush", NativeChannel::Flush);
  SetMethod(isolate, ch, external, "written", NativeChannel::Written);
  SetMethod(isolate, ch, external, "enableOutOfLine", NativeChannel::EnableOutOfLine);
  SetMethod(isolate, ch, external, "enableSegmentPool", NativeChannel::EnableSegmentPool);
  SetMethod(isolate, ch, external, "acceptSegmentPool", NativeChannel::AcceptSegmentPool);
  SetMethod(isolate, ch, external, "recycleSegments", NativeChannel::RecycleSegments);
  SetMethod(isolate, ch, external, "takeDroppedSegments", NativeChannel::TakeDroppedSegments);
  SetMethod(isolate, ch, external, "trimSegments", NativeChannel::TrimSegments);
  SetMethod(isolate, ch, external, "forgetSegments", NativeChannel::ForgetSegments);
  SetMethod(isolate, ch, external, "segmentPoolStats", NativeChannel::SegmentPoolStats);
  SetMethod(isolate, ch, external, "setMaxMessageSize", NativeChannel::SetMaxMessageSize);
  SetMethod(isolate, ch, external, "acceptHandles", NativeChannel::AcceptHandles);
  SetMethod(isolate, ch, external, "decodeInJs", NativeChannel::DecodeInJs);
  SetMethod(isolate, ch, external, "allowRings", NativeChannel::AllowRings);
  SetMethod(isolate, ch, external, "enableRings", NativeChannel::EnableRings);
  SetMethod(isolate, ch, external, "readStart", NativeChannel::ReadStart);
  SetMethod(isolate, ch, external, "readStop", NativeChannel::ReadStop);
  SetMethod(isolate, ch, external, "ref", HandleWrap::Ref);
  SetMethod(isolate, ch, external, "unref", HandleWrap::Unref);
  SetMethod(isolate, ch, external, "close", HandleWrap::Close);
  SetMethod(isolate, ch, external, "stats", NativeChannel::Stats);
  SetMethod(isolate, ch, external, "fd", NativeChannel::Fd);
  data->channel_template.Reset(isolate, ch);
  exports->Set(context, OneByteString(isolate, "NativeChannel"), ch->GetFunction(context).ToLocalChecked())
      .Check();

  // statsLayout: { name: index, ..., histogramBuckets, length } for stats().
  Local<Object> layout = Object::New(isolate);
  for (const stats::Field& f : stats::kFields) {
    layout->Set(context, OneByteString(isolate, f.name), v8::Integer::New(isolate, f.index)).Check();
  }
  layout
      ->Set(context, OneByteString(isolate, "histogramBuckets"),
            v8::Integer::New(isolate, stats::kHistogramBuckets))
      .Check();
  layout->Set(context, OneByteString(isolate, "length"), v8::Integer::New(isolate, stats::kCount)).Check();
  exports->Set(context, OneByteString(isolate, "statsLayout"), layout).Check();

  // endReasons: the names onend's first argument takes, in the enum's order
  // (src/core/end_reason.h), so lib/ can check its table against them.
  Local<Array> reasons = Array::New(isolate, static_cast<int>(kEndReasonCount));
  for (size_t i = 0; i < kEndReasonCount; i++) {
    reasons->Set(context, static_cast<uint32_t>(i), OneByteString(isolate, kEndReasonNames[i])).Check();
  }
  exports->Set(context, OneByteString(isolate, "endReasons"), reasons).Check();
}

}  // namespace procwire
