#include "addon_data.h"

#include <vector>

namespace procwire {

using v8::Context;
using v8::Isolate;
using v8::Local;
using v8::MaybeLocal;
using v8::String;
using v8::Value;

AddonData::AddonData(Isolate* isolate_) : isolate(isolate_), loop(node::GetCurrentEventLoop(isolate_)) {}

AddonData::~AddonData() = default;

Local<String> OneByteString(Isolate* isolate, const char* s) {
  return String::NewFromOneByte(isolate, reinterpret_cast<const uint8_t*>(s),
                                v8::NewStringType::kInternalized)
      .ToLocalChecked();
}

Local<String> ErrnoName(Isolate* isolate, int error) {
  // libuv's error codes are -errno on Unix; it names the ones Node knows
  // (and writes "Unknown system error N" for others).
  char name[64];
  uv_err_name_r(-error, name, sizeof(name));
  return String::NewFromUtf8(isolate, name).ToLocalChecked();
}

MaybeLocal<Value> MakeCodedError(AddonData* data, Local<Context> context, const char* code,
                                 const char* message, Local<Value> cause) {
  Isolate* isolate = data->isolate;
  Local<Value> argv[] = {OneByteString(isolate, code), String::NewFromUtf8(isolate, message).ToLocalChecked(),
                         cause.IsEmpty() ? Local<Value>(v8::Undefined(isolate)) : cause};
  return data->make_error.Get(isolate)->Call(context, v8::Undefined(isolate), 3, argv);
}

void ThrowCodedError(AddonData* data, Local<Context> context, const char* code, const char* message) {
  Local<Value> err;
  if (MakeCodedError(data, context, code, message).ToLocal(&err)) {
    data->isolate->ThrowException(err);
  }
}

// Frees this environment's state at its teardown (see AddonData).
void AddonData::Teardown(void* arg) {
  AddonData* data = static_cast<AddonData*>(arg);
  data->tearing_down = true;
  // Copy: closing removes entries from the set.
  std::vector<Closable*> open(data->open_handles.begin(), data->open_handles.end());
  for (Closable* h : open) h->CloseForTeardown();
  // This object may outlive the isolate (until the last close callback), so
  // its V8 handles go now.
  data->buffer_constructor.Reset();
  data->make_error.Reset();
  // Freed now, or by the last close callback (AddonData::HandleClosed).
  if (data->closing_handles == 0) delete data;
}

}  // namespace procwire
