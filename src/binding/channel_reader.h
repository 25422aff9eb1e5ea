// ChannelReader: a native channel's inbound path from the socket: reads
// bounded per wake-up (read policy, src/core/channel_policy.h), framing with
// the held frames of a provisional (hello) limit, the descriptors that ride
// on the bytes, ring records merged in by their marks, and how a read that
// ended the stream reports it (EndAfterRead). What the reads bring goes to
// the MessageBatch; the JS method acceptHandles.
//
// Ownership and lifetime: a plain member of NativeChannel, created with it;
// its read block is freed with it (or lent to Buffers that outlive it, see
// payload_memory.h). Threading: the environment's thread only.
#ifndef PROCWIRE_BINDING_CHANNEL_READER_H_
#define PROCWIRE_BINDING_CHANNEL_READER_H_

#include "../core/read_end.h"
#include "channel_common.h"
#include "message_batch.h"

namespace procwire {

class ChannelWriter;
class RingSide;
class SocketSpin;

class ChannelReader {
 public:
  // The reader's back-reference to its channel.
  class Delegate {
   public:
    explicit Delegate(NativeChannel* channel) : channel_(channel) {}
    AddonData* data() const;
    int fd() const;
    bool closing() const;
    bool ended() const;
    FrameReader& framer() const;
    Inbound& inbound() const;
    Counters& counters() const;
    MessageBatch& batch() const;
    RingSide& rings() const;
    ChannelWriter& writer() const;
    SocketSpin& spin() const;
    void UpdatePoll() const;
    void End(EndReason reason, Local<Value> err, int sys_error = 0) const;

   private:
    NativeChannel* channel_;
  };

  explicit ChannelReader(NativeChannel* channel) : delegate_(channel) {}
  ~ChannelReader() { delete block_; }

  static void AddMethods(Isolate* isolate, Local<FunctionTemplate> t, Local<v8::External> external);

  // The socket is readable (or hung up) while reading.
  void OnReadable(Local<Context> context);
  // libuv reported a socket error (not while connecting).
  void OnPollError(Local<Context> context);
  // The peer hung up while reads are paused.
  void OnHangUpWhilePaused();
  // JavaScript's readStart and readStop, and the channel's end (which
  // pauses for good).
  bool reading() const { return flow_ == Flow::kReading; }
  void Resume(bool ended) { flow_ = ended ? Paused() : Flow::kReading; }
  void Pause() { flow_ = Paused(); }
  // The peer hung up while paused, and the rest is read on resume.
  bool peer_hung_up() const { return flow_ == Flow::kPausedPeerGone; }
  // Bytes of whole socket frames framed so far: the reader's side of the
  // ring records' socket marks.
  uint64_t socket_framed() const { return socket_framed_; }
  void EndTruncated(Local<Context> context);

  void ReleaseV8Handles() {
    if (block_ != nullptr) block_->ReleaseArrayBuffer();
  }

 private:
  void AcceptHandles(const FunctionCallbackInfo<Value>& args);
  void ReadAll(Local<Context> context);
  bool ReadSocket(Local<Context> context, BatchLists* lists, ReadEnd* end);
  void EndAfterRead(Local<Context> context, EndReason reason, int sys_error);
  bool ReleaseHeldFrames(Local<Context> context);
  bool NothingLeftToRead();
  ReadBlock* FreshBlock();
  void DeliverSocketFrame(Local<Context> context, ReadBlock* block, const FrameReader::Frame& frame,
                          BatchLists* lists, v8::TryCatch* try_catch);

  Delegate delegate_;
  ReadBlock* block_ = nullptr;
  uint64_t socket_framed_ = 0;
  // The size of the last frame read from the socket: whether the peer sends
  // large frames (see kLargeFrameSize and kLargeFrameLimit).
  size_t last_socket_frame_size_ = 0;
  // Whether reads flow: reading (from the start), paused by JavaScript or
  // by the end, or paused after the peer hung up (OnHangUpWhilePaused), so
  // the hang-up is no longer watched and the rest is read on resume.
  enum class Flow : uint8_t { kReading, kPaused, kPausedPeerGone };
  Flow Paused() const { return flow_ == Flow::kPausedPeerGone ? flow_ : Flow::kPaused; }
  Flow flow_ = Flow::kReading;
  // A socket error (positive errno) seen while paused with data left: the
  // end of the stream, read on resume, reports it.
  int deferred_error_ = 0;
};

}  // namespace procwire

#endif  // PROCWIRE_BINDING_CHANNEL_READER_H_
