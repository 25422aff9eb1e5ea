// NativeChannel: one connected stream socket (socketpair, unix or TCP), read
// and written by libuv's poll watcher on the environment's loop, framed by
// FrameReader and encoded/decoded by the codec without leaving C++ until a
// whole read's messages are handed to JavaScript in one call.
//
// NativeListener: a listening socket whose accepted descriptors are handed to
// JavaScript in batches.
//
// Ownership and lifetime: each object is owned by itself while its descriptor
// is open (it keeps its JS wrapper alive through a strong Global); Close()
// starts uv_close, whose callback closes the descriptor and deletes the
// object. The JS wrapper's internal field is cleared then, so calls on a
// closed handle find nullptr and are refused by the JS layer before reaching
// here.
// Threading: the environment's thread only.
#ifndef PROCWIRE_BINDING_CHANNEL_H_
#define PROCWIRE_BINDING_CHANNEL_H_

#include <v8.h>

#include "addon_data.h"
#include "check.h"

namespace procwire {

void InitChannel(AddonData* data, v8::Local<v8::Context> context, v8::Local<v8::Object> exports);

}  // namespace procwire

#endif  // PROCWIRE_BINDING_CHANNEL_H_
