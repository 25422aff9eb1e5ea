// The NativeChannel class, private to the files that implement it (see
// native_channel.h for what it is, and docs/internals.md, "Native channel",
// for how its files divide the work). Only native_channel*.cc, channel_*.cc
// and socket_spin.cc include this header.
//
// One class, defined over several files by direction, so the hot paths
// (send: writer; receive: reader and rings) keep every call inside one
// translation unit and gain no indirection:
//   native_channel.cc   New(), argument checks, the method table, OnPoll,
//                       lifecycle (End, close), stats;
//   channel_writer.cc   the outbound path: frames to the ring or the socket;
//   channel_reader.cc   the inbound path: socket reads, framing, decoding,
//                       batches handed to JavaScript;
//   channel_rings.cc    ring set-up, ring reads and their wake-ups;
//   channel_segments.cc out-of-line segments and the recycled pool;
//   socket_spin.cc      the short spin after a socket read.
#ifndef PROCWIRE_BINDING_NATIVE_CHANNEL_IMPL_H_
#define PROCWIRE_BINDING_NATIVE_CHANNEL_IMPL_H_

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

#include "../core/channel_policy.h"
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
#include "../core/ring_link.h"
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

// The read and write policies (src/core/channel_policy.h).
using read_policy::kDirectReadThreshold;
using read_policy::kLargeFrameLimit;
using read_policy::kLargeFrameReadSize;
using read_policy::kLargeFrameSize;
using read_policy::kMaxBytesPerWake;
using read_policy::kMaxReadsPerWake;
using read_policy::kMaxRingPeersChecked;
using read_policy::kMaxRingPollNs;
using read_policy::kMaxRingRecordsPerWake;
using read_policy::kSocketSpinNs;
using read_policy::kSpinYieldContendedNs;
using write_policy::kWidenSendBufferFrame;
using write_policy::kWriteGatheredMinFrame;
using write_policy::kWriteNowThreshold;
// The control frames' first bytes (docs/protocol.md): [0xFE][n] announces a
// message's segments, [0xFD][1] sets up the sender's ring.
using protocol::kRingControlByte;
using protocol::kRingSetupVersion;
using protocol::kSegmentsControlByte;
// Advanced frames up to this size are handed to JavaScript as bytes, to be
// decoded there by the fast path (lib/codec/advanced-fast.js), when the
// channel asked for it (decodeInJs): for small messages, setting up V8's
// ValueDeserializer costs more than the whole JavaScript decode.
constexpr size_t kJsDecodeMaxBytes = 2048;

inline void FreeBlock(uint8_t* data, void* /*hint*/) { std::free(data); }
// For a chunk that starts inside its block: the hint is the block.
inline void FreeHintBlock(uint8_t* /*data*/, void* hint) { std::free(hint); }

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
        configured_max_message_size_(max_message_size),
        ring_frames_(format, max_message_size),
        phase_(connecting ? Phase::kConnecting : Phase::kOpen),
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

  static void New(const FunctionCallbackInfo<Value>& args);
  // Each file registers its own methods on the template (InitNativeChannel).
  static void AddWriterMethods(Isolate* isolate, Local<FunctionTemplate> ch, Local<v8::External> external);
  static void AddSegmentMethods(Isolate* isolate, Local<FunctionTemplate> ch, Local<v8::External> external);
  static void AddReaderMethods(Isolate* isolate, Local<FunctionTemplate> ch, Local<v8::External> external);
  static void AddRingMethods(Isolate* isolate, Local<FunctionTemplate> ch, Local<v8::External> external);

  static void Write(const FunctionCallbackInfo<Value>& args);

  static void WriteBuffer(const FunctionCallbackInfo<Value>& args);

  static uint8_t* AllocateFrame(const FunctionCallbackInfo<Value>& args, size_t size);

  static bool CopyFrame(const FunctionCallbackInfo<Value>& args, Local<v8::ArrayBufferView> view, size_t size,
                        EncodedFrame* frame);

  static void WriteFrame(const FunctionCallbackInfo<Value>& args);

  static void Flush(const FunctionCallbackInfo<Value>& args);

  static void Written(const FunctionCallbackInfo<Value>& args);

  static void AcceptHandles(const FunctionCallbackInfo<Value>& args);

  static void StageFrames(const FunctionCallbackInfo<Value>& args);

  static void WriteStaged(const FunctionCallbackInfo<Value>& args);

  static void DecodeInJs(const FunctionCallbackInfo<Value>& args);

  static void EnableSegmentPool(const FunctionCallbackInfo<Value>& args);

  static void AcceptSegmentPool(const FunctionCallbackInfo<Value>& args);

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

  static void RecycleSegments(const FunctionCallbackInfo<Value>& args);

  static Local<Array> IdArray(Isolate* isolate, const std::vector<uint32_t>& ids);

  static void TakeDroppedSegments(const FunctionCallbackInfo<Value>& args);

  static void TrimSegments(const FunctionCallbackInfo<Value>& args);

  static void ForgetSegments(const FunctionCallbackInfo<Value>& args);

  static void SegmentPoolStats(const FunctionCallbackInfo<Value>& args);

  static void EnableOutOfLine(const FunctionCallbackInfo<Value>& args);

  static void AllowRings(const FunctionCallbackInfo<Value>& args);

  static void EnableRings(const FunctionCallbackInfo<Value>& args);

  bool QueueRingSetup();

  static void SetMaxMessageSize(const FunctionCallbackInfo<Value>& args);

  static void ReadStart(const FunctionCallbackInfo<Value>& args);
  static void ReadStop(const FunctionCallbackInfo<Value>& args);

  static void Stats(const FunctionCallbackInfo<Value>& args);

  static void Fd(const FunctionCallbackInfo<Value>& args);

  uv_handle_t* ref_handle() override { return reinterpret_cast<uv_handle_t*>(&poll_); }

  void ReleaseV8Handles() override;

 private:
  static Local<Function> GetFunction(Local<Context> context, Local<Object> from, const char* name);

  bool CheckSize(Local<Context> context, EncodedFrame& frame, size_t segment_bytes);

  bool WriteToRing(const uint8_t* data, size_t size);

  void CountSocketFrame(size_t size);

  void Enqueue(const EncodedFrame& frame);

  void WriteOutGathered();

  bool ShouldWriteNow(size_t size);

  bool WriteFrameNow(const FunctionCallbackInfo<Value>& args, Local<v8::ArrayBufferView> view, size_t size);

  void OutboundRingFailed();

  // Monotonic byte counts over both ways out (see Write and Flush).
  double TotalPushed() const { return ring_user_bytes_ + static_cast<double>(queue_.total_pushed()); }
  double TotalWritten() const { return ring_user_bytes_ + static_cast<double>(queue_.total_written()); }

  int DoFlush();

  void UpdatePoll();

  static void OnPoll(uv_poll_t* handle, int status, int events);

  void StartSocketSpin();

  void StopSocketSpin();

  static void OnSocketSpin(uv_idle_t* handle);

  void FinishConnect();

  void OnReadable(Local<Context> context);

  void ReadAll(Local<Context> context);
  void EndAfterRead(Local<Context> context, EndReason reason, int sys_error);
  bool ReleaseHeldFrames(Local<Context> context);
  bool NothingLeftToRead();

  void StartBatch();

  void EmitBatch(std::vector<Local<Value>>& messages, std::vector<Local<Value>>& errors,
                 std::vector<Local<Value>>& handle_fds);

  void EndRingCorrupt(Local<Context> context);

  void DeliverSocketFrame(Local<Context> context, ReadBlock* block, const FrameReader::Frame& frame,
                          std::vector<Local<Value>>* messages, std::vector<Local<Value>>* errors,
                          std::vector<Local<Value>>* handle_fds, v8::TryCatch* try_catch);

  // How a DrainRing call ended.
  enum class RingDrain : uint8_t {
    kEmpty,     // The ring is empty; sleep was not announced (announce false).
    kSleeping,  // The ring is empty and sleep is announced.
    kWaiting,   // A record waits for socket bytes not read yet.
    kMore,      // The batch budget is spent; our wake-up link is signalled.
    kCorrupt,   // The peer broke the ring (corrupt_reason()).
  };

  void TakeRing(int ring_fd, int wake_fd);

  RingDrain DrainRing(Local<Context> context, std::vector<Local<Value>>* messages,
                      std::vector<Local<Value>>* errors, std::vector<Local<Value>>* handle_fds,
                      v8::TryCatch* try_catch, uint64_t limit = UINT64_MAX, bool announce = true);

  static void OnRingPoll(uv_poll_t* handle, int status, int events);

  void EndTruncated(Local<Context> context);

  void DeliverFrame(Local<Context> context, ReadBlock* block, const FrameReader::Frame& frame,
                    Inbound::Source source, std::vector<Local<Value>>* messages,
                    std::vector<Local<Value>>* errors, std::vector<Local<Value>>* handle_fds,
                    v8::TryCatch* try_catch);

  bool TakeForJs(const FrameReader::Frame& frame, size_t index);

  bool IsHandleMessage(Local<Context> context, Local<Value> value);

  const char* MapSegments(Isolate* isolate, std::vector<int>* fds, InSegments* segments);

  const char* TakePooledSegments(Isolate* isolate, const std::vector<SegmentEntry>& entries,
                                 std::vector<int>* fds, InSegments* segments);

  void OnSegmentsFree(std::vector<uint32_t>& ids);

  void End(EndReason reason, Local<Value> err, int sys_error = 0);

  void CloseUvHandles() override;

  bool RingRecordsWaiting() const override {
    return reading_ && !closing_ && !ended() && rings_->InboundMaybeReady();
  }

  bool OtherRingHasRecords() const;

  ~NativeChannel() override {
    CloseFd(fd_);
    queue_.Clear();
    delete block_;
  }

  int fd_;
  FrameReader reader_;
  // The limit the channel was made with: a lower one set later is a
  // handshake's provisional limit (see SetMaxMessageSize).
  size_t configured_max_message_size_;
  // Frames from ring records, which hold whole frames only.
  FrameReader ring_frames_;
  WriteQueue queue_;
  // Shared-memory rings with a procwire peer on this host (see
  // ring_link.h); null until either side sets one up.
  std::unique_ptr<RingLink> rings_;
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
  // Where the stream is: connecting (a connect() in progress), open, or
  // ended (onend was called; nothing is read or written any more). Closing
  // is HandleWrap's (closing_), after any of these.
  enum class Phase : uint8_t { kConnecting, kOpen, kEnded };
  Phase phase_;
  bool connecting() const { return phase_ == Phase::kConnecting; }
  bool ended() const { return phase_ == Phase::kEnded; }
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
  // A socket error (positive errno) seen while paused with data left: the
  // end of the stream, read on resume, reports it.
  int deferred_error_ = 0;
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

}  // namespace procwire

#endif  // PROCWIRE_BINDING_NATIVE_CHANNEL_IMPL_H_
