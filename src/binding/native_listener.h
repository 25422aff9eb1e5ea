// NativeListener: a listening socket whose accepted descriptors are handed to
// JavaScript in batches.
//
// Ownership and lifetime: a HandleWrap (handle_wrap.h): owned by itself
// while its descriptor is open; deleted after close() once its libuv
// handles have closed.
// Threading: the environment's thread only.
#ifndef PROCWIRE_BINDING_NATIVE_LISTENER_H_
#define PROCWIRE_BINDING_NATIVE_LISTENER_H_

#include <v8.h>

#include "addon_data.h"

namespace procwire {

// Exports NativeListener.
void InitNativeListener(AddonData* data, v8::Local<v8::Context> context, v8::Local<v8::Object> exports);

}  // namespace procwire

#endif  // PROCWIRE_BINDING_NATIVE_LISTENER_H_
