// NativeFramer: the stream framer and decoder exposed to JavaScript (used by
// the backends that read bytes in JavaScript: TLS, NATS, the fallback).
//
// Ownership: owned by its JS wrapper (freed by the wrapper's weak callback);
// it holds no descriptor or libuv handle.
// Threading: the isolate's thread only.
#ifndef PROCWIRE_BINDING_FRAMER_WRAP_H_
#define PROCWIRE_BINDING_FRAMER_WRAP_H_

#include <v8.h>

#include "addon_data.h"

namespace procwire {

// Exports NativeFramer.
void InitFramerWrap(AddonData* data, v8::Local<v8::Context> context, v8::Local<v8::Object> exports);

}  // namespace procwire

#endif  // PROCWIRE_BINDING_FRAMER_WRAP_H_
