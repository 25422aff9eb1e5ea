// The addon's plain functions (no wrapped object): setup, the one-shot codec
// (encode, decode) and its fast path's helpers (writeString,
// readOneByteString), socket set-up (socketPair, listen and connect for unix
// and TCP, peer credentials, closeFd, setBlocking) and alloc. Each returns
// its result or -errno; none keeps state.
// Threading: the isolate's thread only.
#ifndef PROCWIRE_BINDING_FUNCTIONS_H_
#define PROCWIRE_BINDING_FUNCTIONS_H_

#include <v8.h>

#include "../core/frame_reader.h"
#include "addon_data.h"

namespace procwire {

// A format argument the JS layer validated (lib/codec/formats.js ids).
WireFormat FormatArg(v8::Local<v8::Value> v);

void InitFunctions(AddonData* data, v8::Local<v8::Context> context, v8::Local<v8::Object> exports);

}  // namespace procwire

#endif  // PROCWIRE_BINDING_FUNCTIONS_H_
