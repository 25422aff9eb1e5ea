// NativeChannel: one connected stream socket (socketpair, unix or TCP), read
// and written by libuv's poll watcher on the environment's loop, framed by
// FrameReader and encoded/decoded by the codec without leaving C++ until a
// whole read's messages are handed to JavaScript in one call.
//
// Ownership and lifetime: a HandleWrap (handle_wrap.h): owned by itself
// while its descriptor is open; deleted after close() once its libuv
// handles have closed.
// Threading: the environment's thread only.
#ifndef PROCWIRE_BINDING_NATIVE_CHANNEL_H_
#define PROCWIRE_BINDING_NATIVE_CHANNEL_H_

#include <v8.h>

#include "addon_data.h"

namespace procwire {

// Exports NativeChannel and statsLayout.
void InitNativeChannel(AddonData* data, v8::Local<v8::Context> context, v8::Local<v8::Object> exports);

}  // namespace procwire

#endif  // PROCWIRE_BINDING_NATIVE_CHANNEL_H_
