// SegmentSide: a native channel's out-of-line segments, both ways: whether
// large views may go out of line (the peer said it takes segments), the
// recycled pool we send from and the peer's pool we map, the segments a
// batch took (acknowledged by JavaScript), and the JS methods that manage
// the pools (enableOutOfLine, enableSegmentPool, acceptSegmentPool,
// recycleSegments, takeDroppedSegments, trimSegments, forgetSegments,
// segmentPoolStats). See src/binding/segments.h for the pools themselves.
//
// Ownership and lifetime: a plain member of NativeChannel, created with it;
// the pools are made when JavaScript enables them and freed with the
// channel; the received pool's async handle closes with the channel's
// handles (Close). Threading: the environment's thread only.
#ifndef PROCWIRE_BINDING_SEGMENT_SIDE_H_
#define PROCWIRE_BINDING_SEGMENT_SIDE_H_

#include "channel_common.h"

namespace procwire {

class SegmentSide {
 public:
  // The segment side's back-reference to its channel.
  class Delegate {
   public:
    explicit Delegate(NativeChannel* channel) : channel_(channel) {}
    AddonData* data() const;
    size_t max_payload_size() const;
    Counters& counters() const;
    Inbound& inbound() const;
    bool closing() const;
    // JavaScript may be called: not closing, ended or tearing down.
    bool may_call() const;
    Local<Context> context() const;
    void Call(const Global<Function>& fn, int argc, Local<Value>* argv) const;

   private:
    NativeChannel* channel_;
  };

  // receive: out-of-line receiving is on (procwire peers on unix sockets,
  // advanced format); threshold: the size from which views go out of line
  // once the peer takes segments.
  SegmentSide(NativeChannel* channel, bool receive, size_t threshold)
      : delegate_(channel), receiving_(receive), threshold_(threshold) {}

  static void AddMethods(Isolate* isolate, Local<FunctionTemplate> t, Local<v8::External> external);

  bool receiving() const { return receiving_; }
  bool sending() const { return sending_; }
  // Fills the out-of-line part of an encode (see EncodeFrame).
  void PrepareOutOfLine(OutOfLine* ool) {
    ool->enabled = sending_;
    ool->threshold = threshold_;
    ool->pool = send_pool_.get();
    ool->strict_transfer = !trusting_peer_;
  }
  // A message of `count` segments (`bytes` in all) was queued.
  void CountSent(size_t bytes, size_t count);
  // The segments taken since the last batch was handed over, then zero.
  double taken_segments() const { return taken_segments_; }
  double taken_segment_bytes() const { return taken_segment_bytes_; }
  void ResetTaken() {
    taken_segments_ = 0;
    taken_segment_bytes_ = 0;
  }

  void SetOnReturn(Local<Function> fn) { on_return_.Reset(delegate_.data()->isolate, fn); }
  void SetSharedCounters(Local<v8::Float64Array> shared);

  // The segments of one received message, mapped or taken from the pool;
  // each returns why they failed, or nullptr.
  const char* MapSegments(Isolate* isolate, std::vector<int>* fds, InSegments* segments);
  const char* TakePooledSegments(Isolate* isolate, const std::vector<SegmentEntry>& entries,
                                 std::vector<int>* fds, InSegments* segments);

  void Close() {
    // No more returns: the pool's async handle closes, and the mappings
    // stay only as long as received Buffers use them.
    if (received_pool_ != nullptr) received_pool_->Close();
  }
  void ReleaseV8Handles() {
    on_return_.Reset();
    shared_counters_.Reset();
    shared_ = nullptr;
  }

 private:
  void EnableOutOfLine(const FunctionCallbackInfo<Value>& args);
  void EnableSegmentPool(const FunctionCallbackInfo<Value>& args);
  void AcceptSegmentPool(const FunctionCallbackInfo<Value>& args);
  void RecycleSegments(const FunctionCallbackInfo<Value>& args);
  void TakeDroppedSegments(const FunctionCallbackInfo<Value>& args);
  void TrimSegments(const FunctionCallbackInfo<Value>& args);
  void ForgetSegments(const FunctionCallbackInfo<Value>& args);
  void SegmentPoolStats(const FunctionCallbackInfo<Value>& args);
  void OnSegmentsFree(std::vector<uint32_t>& ids);

  Delegate delegate_;
  // Out-of-line receiving, and sending, which waits for the peer to say
  // it can receive (enableOutOfLine).
  const bool receiving_;
  bool sending_ = false;
  const size_t threshold_;
  // The peer announced `pool`: transfers to it are sealed future-write.
  bool trusting_peer_ = false;
  // Segments taken in the batch being assembled (count, bytes).
  double taken_segments_ = 0;
  double taken_segment_bytes_ = 0;
  // Recycled segments: our pool (the peer takes them) and the peer's
  // segments we map (we announced `pool`); see src/binding/segments.h.
  std::unique_ptr<SegmentPool> send_pool_;
  std::unique_ptr<ReceivedSegmentPool> received_pool_;
  Global<Function> on_return_;
  // Optional counters shared with JavaScript (see NativeChannel::New).
  Global<v8::Float64Array> shared_counters_;
  double* shared_ = nullptr;
};

}  // namespace procwire

#endif  // PROCWIRE_BINDING_SEGMENT_SIDE_H_
