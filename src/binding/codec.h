// Node's child_process `advanced` and `json` payload codecs, on V8's own
// ValueSerializer and JSON, so the bytes are the ones Node writes.
//
// The functions are in codec.cc (the entry points and json), codec_advanced.cc,
// codec_transfers.cc and codec_natives.cc (the JS-callable helpers); see
// codec_impl.h for how they divide the work. Ownership: nothing here keeps
// state between calls; an encoded frame's block and an OutOfLine's
// descriptors belong to the caller.
// Threading: the isolate's thread only. Every function that returns false has
// left a JavaScript exception pending (a coded error made by the JS factory,
// or one V8 or user code threw); callers return and let it propagate.
#ifndef PROCWIRE_BINDING_CODEC_H_
#define PROCWIRE_BINDING_CODEC_H_

#include <v8.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "../core/frame_reader.h"
#include "../core/protocol.h"
#include "../core/shm.h"
#include "addon_data.h"
#include "check.h"

namespace procwire {

// A whole frame in a malloc'd block the caller owns (free()).
struct EncodedFrame {
  uint8_t* data = nullptr;
  size_t size = 0;
};

// One segment of an out-of-line message, as the control frame names it
// (kind, recycled segment id, bytes of the message in it).
using SegmentRef = SegmentEntry;

// Out-of-line sending (procwire peers over unix sockets only): large views
// travel in sealed memfd segments passed beside the frame, and the payload
// holds a reference (host-object tag 2, a procwire extension Node never
// sees). ArrayBuffers in `transfer` are handed over (zero copy when made by
// procwire.alloc) and detached after a successful encode.
struct OutOfLine {
  // Views of at least this many bytes go out of line; SIZE_MAX: none.
  size_t threshold = SIZE_MAX;
  bool enabled = false;
  std::vector<v8::Local<v8::ArrayBuffer>> transfer;
  // Filled by EncodeFrame: one descriptor per segment, in reference order.
  // The caller owns them (and closes them if it does not send them).
  std::vector<int> fds;
  // The ArrayBuffer each segment holds (whole), or empty for a segment that
  // holds only one view's bytes; used so views sharing a buffer share a
  // segment and arrive sharing one ArrayBuffer.
  // Globals: V8 calls the serializer delegate inside HandleScopes of its
  // own, so a Local made there would not outlive the call.
  std::vector<v8::Global<v8::ArrayBuffer>> sources;
  size_t segment_bytes = 0;
  // Copies go into recycled segments from this pool when it has room (null:
  // always a fresh sealed copy). Set only towards a peer that accepts them.
  SegmentPool* pool = nullptr;
  // Transfers are sealed with F_SEAL_WRITE (true; the sender's mapping is
  // torn down first) or F_SEAL_FUTURE_WRITE (false; a trusting peer).
  bool strict_transfer = true;
  // One entry per segment, in reference order (see SegmentRef).
  std::vector<SegmentRef> refs;
  bool any_pooled = false;
};

// Gives back what an encode took for a frame that will not be sent after
// all: closes the descriptors and returns recycled segments to the pool (one
// the peer has never seen is destroyed instead).
void AbandonSegments(OutOfLine* ool);

// At most protocol::kMaxSegmentsPerFrame segments travel with one message (one
// sendmsg's worth of descriptors on the receiving side); further large views
// go inline.
using protocol::kMaxSegmentsPerFrame;

// Received segments for the frame being decoded, in reference order.
struct InSegments {
  std::vector<v8::Local<v8::ArrayBuffer>> buffers;
};

// Encodes value as one frame of the given format: for advanced, the u32
// big-endian length header and the V8 payload; for json, the JSON text and
// '\n'. ool may be null (everything inline, nothing transferred).
bool EncodeFrame(AddonData* data, v8::Local<v8::Context> context, WireFormat format,
                 v8::Local<v8::Value> value, EncodedFrame* out, OutOfLine* ool = nullptr);

// The default bound for resizable ArrayBuffers in decoded payloads: the
// default maxMessageSize.
constexpr uint64_t kDefaultMaxBuffer = uint64_t{256} << 20;

// Where a payload's bytes live, so decoded views may borrow them instead of
// copying (as Node's deserializer does for aligned views).
class PayloadMemory {
 public:
  virtual ~PayloadMemory() = default;
  // The start of the memory the ArrayBuffer below covers.
  virtual const uint8_t* base() const = 0;
  // An ArrayBuffer over base(); empty when borrowing is not possible.
  virtual v8::MaybeLocal<v8::ArrayBuffer> GetArrayBuffer(v8::Isolate* isolate) = 0;
  // Views shorter than this are copied rather than borrowed: a few bytes
  // kept alive must not pin a whole large block (a channel's read block).
  virtual size_t min_borrow() const { return 0; }
};

// Decodes one payload (no length header / no terminator). memory may be null
// (views are then copied). Returns false with a coded error pending
// (ERR_PROCWIRE_DECODE or a more specific code) when the payload is invalid.
// max_buffer: the largest maxByteLength a resizable ArrayBuffer in the
// payload may declare (V8 reserves it up front); larger is a decode error.
bool DecodePayload(AddonData* data, v8::Local<v8::Context> context, WireFormat format, const uint8_t* payload,
                   size_t size, PayloadMemory* memory, v8::Local<v8::Value>* out,
                   InSegments* segments = nullptr, uint64_t max_buffer = kDefaultMaxBuffer);

// Index of a top-level message's size bucket for the log-spaced histograms:
// bucket i holds sizes in [2^i, 2^(i+1)), bucket 0 also holds 0.
constexpr int kHistogramBuckets = 32;
inline int SizeBucket(size_t size) {
  if (size <= 1) return 0;
  int b = 63 - __builtin_clzll(static_cast<unsigned long long>(size));
  return b >= kHistogramBuckets ? kHistogramBuckets - 1 : b;
}

// writeString(string, arrayBuffer, frameStart, offset) -> the offset after
// the string, written at `offset` of `arrayBuffer` as V8's ValueSerializer
// writes it inside a frame that starts at `frameStart` (see
// core/v8_string.h); -2 when the memory has no room for it; -1 when it is
// left to the caller (a two-byte string at an odd address, a string over
// 4 GiB, a detached buffer). The JavaScript fast path of the advanced codec
// writes its longer strings through it: the string's representation says
// how V8 writes it, and the characters are copied in the same call.
void WriteString(const v8::FunctionCallbackInfo<v8::Value>& args);

// readOneByteString(memory, start, end) -> the string of the Latin-1 bytes
// [start, end) of `memory` (an ArrayBuffer or a SharedArrayBuffer), or
// undefined when it does not hold them (detached meanwhile) or is not
// memory. The JavaScript decoder of the advanced codec makes its one-byte
// strings through it: Buffer#latin1Slice makes the same copy behind an
// environment lookup and conversions of a view and two indexes, which cost
// more than the copy for a short string.
void ReadOneByteString(const v8::FunctionCallbackInfo<v8::Value>& args);

}  // namespace procwire

#endif  // PROCWIRE_BINDING_CODEC_H_
