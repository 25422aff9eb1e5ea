// Declarations private to the codec's files (codec.h declares what the rest
// of the binding calls). The codec is one set of plain functions over several
// translation units, divided by responsibility:
//   codec.cc            EncodeFrame / DecodePayload, the json format;
//   codec_advanced.cc   the advanced format: V8's ValueSerializer and
//                       ValueDeserializer with procwire's delegates (views,
//                       out-of-line segments) and the view type helpers they
//                       call for every view;
//   codec_transfers.cc  transferred ArrayBuffers (segments, detach, seal) and
//                       AbandonSegments;
//   codec_natives.cc    the JS-callable helpers of the JavaScript codec fast
//                       path (writeString, readOneByteString).
// Each function here runs at most once per message; whatever runs per value
// or per view stays in the file of its caller.
//
// Ownership: as in codec.h: nothing here keeps state; an OutOfLine's
// descriptors belong to the caller of EncodeFrame.
// Threading: the isolate's thread only. Every function that returns false has
// left a JavaScript exception pending, except DecodeAdvanced (see there).
#ifndef PROCWIRE_BINDING_CODEC_IMPL_H_
#define PROCWIRE_BINDING_CODEC_IMPL_H_

#include <v8.h>

#include <cstddef>
#include <cstdint>

#include "addon_data.h"
#include "codec.h"

namespace procwire {

// In codec_advanced.cc: encodes value in the advanced format: the u32
// big-endian length header, V8's header and the value, in one block. With
// ool, large views may go out of line and ool->transfer is handed over.
bool EncodeAdvanced(AddonData* data, v8::Local<v8::Context> context, v8::Local<v8::Value> value,
                    EncodedFrame* out, OutOfLine* ool);

// In codec_advanced.cc: decodes an advanced payload under the caller's TryCatch
// (see DecodeUnchecked in codec.cc): false leaves an exception there or none,
// and when the delegate refused a host object, *failure_code and
// *failure_message say why.
bool DecodeAdvanced(AddonData* data, v8::Local<v8::Context> context, const uint8_t* payload, size_t size,
                    PayloadMemory* memory, v8::Local<v8::Value>* out, const char** failure_code,
                    const char** failure_message, InSegments* segments);

// Puts each transferred ArrayBuffer in a segment of its own, first, so V8's
// transfer ids equal segment indexes. A buffer made by procwire.alloc hands
// over its memfd (dup'd; sealed after the encode); any other is copied into a
// sealed segment now. Inline channels (ool->enabled false) keep the bytes in
// the payload and only detach afterwards. In codec_transfers.cc, called by
// EncodeAdvanced before the value is written.
bool PrepareTransfers(AddonData* data, v8::Local<v8::Context> context, v8::ValueSerializer* serializer,
                      OutOfLine* ool);

// After a successful encode: detaches every transferred buffer (the sender
// loses access, as with postMessage), which releases an allocated segment's
// shared mapping, then seals that segment so the receiver cannot see later
// writes. Strict: the mapping is torn down now and F_SEAL_WRITE applied;
// otherwise (a trusting peer) F_SEAL_FUTURE_WRITE at once and the mapping
// is torn down in the background, so the cost does not grow with the size.
// In codec_transfers.cc; a json frame calls it with a detach-only OutOfLine.
bool FinishTransfers(AddonData* data, v8::Local<v8::Context> context, OutOfLine* ool);

}  // namespace procwire

#endif  // PROCWIRE_BINDING_CODEC_IMPL_H_
