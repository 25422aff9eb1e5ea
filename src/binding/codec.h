// Node's child_process `advanced` and `json` payload codecs, on V8's own
// ValueSerializer and JSON, so the bytes are the ones Node writes.
//
// Threading: the isolate's thread only. Every function that returns false has
// left a JavaScript exception pending (a coded error made by the JS factory,
// or one V8 or user code threw); callers return and let it propagate.
#ifndef PROCWIRE_BINDING_CODEC_H_
#define PROCWIRE_BINDING_CODEC_H_

#include <v8.h>

#include <cstddef>
#include <cstdint>

#include "../core/frame_reader.h"
#include "addon_data.h"
#include "check.h"

namespace procwire {

// A whole frame in a malloc'd block the caller owns (free()).
struct EncodedFrame {
  uint8_t* data = nullptr;
  size_t size = 0;
};

// Encodes value as one frame of the given format: for advanced, the u32
// big-endian length header and the V8 payload; for json, the JSON text and
// '\n'.
bool EncodeFrame(AddonData* data, v8::Local<v8::Context> context, WireFormat format,
                 v8::Local<v8::Value> value, EncodedFrame* out);

// Where a payload's bytes live, so decoded views may borrow them instead of
// copying (as Node's deserializer does for aligned views).
class PayloadMemory {
 public:
  virtual ~PayloadMemory() = default;
  // The start of the memory the ArrayBuffer below covers.
  virtual const uint8_t* base() const = 0;
  // An ArrayBuffer over base(); empty when borrowing is not possible.
  virtual v8::MaybeLocal<v8::ArrayBuffer> GetArrayBuffer(v8::Isolate* isolate) = 0;
};

// Decodes one payload (no length header / no terminator). memory may be null
// (views are then copied). Returns false with a coded error pending
// (ERR_PROCWIRE_DECODE or a more specific code) when the payload is invalid.
bool DecodePayload(AddonData* data, v8::Local<v8::Context> context, WireFormat format,
                   const uint8_t* payload, size_t size, PayloadMemory* memory,
                   v8::Local<v8::Value>* out);

// Index of a top-level message's size bucket for the log-spaced histograms:
// bucket i holds sizes in [2^i, 2^(i+1)), bucket 0 also holds 0.
constexpr int kHistogramBuckets = 32;
inline int SizeBucket(size_t size) {
  if (size <= 1) return 0;
  int b = 63 - __builtin_clzll(static_cast<unsigned long long>(size));
  return b >= kHistogramBuckets ? kHistogramBuckets - 1 : b;
}

}  // namespace procwire

#endif  // PROCWIRE_BINDING_CODEC_H_
