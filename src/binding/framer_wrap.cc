#include "framer_wrap.h"

#include <cstdio>
#include <vector>

#include "../core/frame_reader.h"
#include "check.h"
#include "codec.h"
#include "functions.h"
#include "handle_wrap.h"
#include "payload_memory.h"

namespace procwire {

using v8::Array;
using v8::ArrayBuffer;
using v8::ArrayBufferView;
using v8::Context;
using v8::Function;
using v8::FunctionCallbackInfo;
using v8::FunctionTemplate;
using v8::Global;
using v8::Integer;
using v8::Isolate;
using v8::Local;
using v8::MaybeLocal;
using v8::Number;
using v8::Object;
using v8::String;
using v8::Value;

namespace {

// The stream framer exposed to JS. Owned by its JS wrapper (weak callback).
class FramerWrap {
 public:
  FramerWrap(Isolate* isolate, Local<Object> wrapper, WireFormat format, size_t max) : reader(format, max) {
    SetWrapped(wrapper, this);
    self_.Reset(isolate, wrapper);
    self_.SetWeak(
        this, [](const v8::WeakCallbackInfo<FramerWrap>& info) { delete info.GetParameter(); },
        v8::WeakCallbackType::kParameter);
  }
  FrameReader reader;

 private:
  Global<Object> self_;
};

void FramerNew(const FunctionCallbackInfo<Value>& args) {
  if (!args.IsConstructCall() || !args[1]->IsNumber() || !(args[1].As<Number>()->Value() >= 0)) {
    ThrowCodedError(AddonData::From(args), args.GetIsolate()->GetCurrentContext(), "ERR_PROCWIRE_INVALID_ARG",
                    "new NativeFramer(format, maxMessageSize): maxMessageSize must be a non-negative number");
    return;
  }
  const double max = args[1].As<Number>()->Value();
  new FramerWrap(args.GetIsolate(), args.This(), FormatArg(args[0]), static_cast<size_t>(max));
}

// Frames bytes with `push` (a call of FrameReader::Push or ReleaseHeld
// with the visitor given), and returns [messages, errors | undefined,
// fatal | undefined], where errors is a flat list of (index, error): the bad
// frame came just before messages[index]. `memory` is what in-place frames
// may borrow (nullptr: they are copied).
template <typename PushFn>
void FrameAndReport(const FunctionCallbackInfo<Value>& args, FramerWrap* self, PayloadMemory* memory,
                    PushFn&& push) {
  AddonData* data = AddonData::From(args);
  Isolate* isolate = args.GetIsolate();
  Local<Context> context = isolate->GetCurrentContext();
  std::vector<Local<Value>> messages;
  std::vector<Local<Value>> errors;
  const WireFormat format = self->reader.format();
  v8::TryCatch try_catch(isolate);
  const FramingError fe = push([&](const FrameReader::Frame& frame) {
    Local<Value> value;
    if (DecodePayload(data, context, format, frame.data, frame.size, frame.in_place ? memory : nullptr,
                      &value, nullptr, self->reader.max_payload_size())) {
      messages.push_back(value);
      return;
    }
    errors.push_back(Integer::NewFromUnsigned(isolate, static_cast<uint32_t>(messages.size())));
    errors.push_back(try_catch.HasCaught() ? try_catch.Exception() : Local<Value>(v8::Undefined(isolate)));
    try_catch.Reset();
  });
  if (try_catch.HasTerminated()) {
    try_catch.ReThrow();
    return;
  }
  Local<Value> fatal = v8::Undefined(isolate);
  if (fe == FramingError::kOutOfMemory) {
    if (!MakeCodedError(data, context, "ERR_PROCWIRE_OUT_OF_MEMORY", "out of memory buffering a frame")
             .ToLocal(&fatal)) {
      try_catch.ReThrow();
      return;
    }
  } else if (fe != FramingError::kNone) {
    char message[160];
    std::snprintf(message, sizeof(message), "frame of %llu bytes exceeds maxMessageSize (%llu bytes)",
                  static_cast<unsigned long long>(self->reader.error_declared_size()),
                  static_cast<unsigned long long>(self->reader.max_payload_size()));
    if (!MakeCodedError(data, context, "ERR_PROCWIRE_MESSAGE_TOO_LARGE", message).ToLocal(&fatal)) {
      try_catch.ReThrow();
      return;
    }
  }
  Local<Value> result[] = {Array::New(isolate, messages.data(), messages.size()),
                           errors.empty() ? Local<Value>(v8::Undefined(isolate))
                                          : Local<Value>(Array::New(isolate, errors.data(), errors.size())),
                           fatal};
  args.GetReturnValue().Set(Array::New(isolate, result, 3));
}

// push(view) -> [messages, errors | undefined, fatal | undefined]. Nothing
// is framed while bytes are held (see pushHeld).
void FramerPush(const FunctionCallbackInfo<Value>& args) {
  auto* self = static_cast<FramerWrap*>(GetWrapped(args.This()));
  CHECK_NOT_NULL(self);
  CHECK(args[0]->IsArrayBufferView());
  Local<ArrayBufferView> view = args[0].As<ArrayBufferView>();
  Local<ArrayBuffer> ab = view->Buffer();
  ViewMemory memory(ab);
  const uint8_t* chunk = static_cast<const uint8_t*>(ab->Data()) + view->ByteOffset();
  const size_t size = view->ByteLength();
  FrameAndReport(args, self, &memory, [&](auto&& visitor) {
    if (self->reader.held()) return self->reader.error();
    return self->reader.Push(chunk, size, visitor);
  });
}

// held() -> true while push() stopped at a frame over a provisional limit
// (setMaxMessageSize's second argument); pushHeld() frames those bytes
// again under the limit now in force, with push()'s result.
void FramerHeld(const FunctionCallbackInfo<Value>& args) {
  auto* self = static_cast<FramerWrap*>(GetWrapped(args.This()));
  CHECK_NOT_NULL(self);
  args.GetReturnValue().Set(self->reader.held());
}

void FramerPushHeld(const FunctionCallbackInfo<Value>& args) {
  auto* self = static_cast<FramerWrap*>(GetWrapped(args.This()));
  CHECK_NOT_NULL(self);
  FrameAndReport(args, self, nullptr, [&](auto&& visitor) { return self->reader.ReleaseHeld(visitor); });
}

// setMaxMessageSize(n[, provisional]) -> false when a frame already
// buffered is over n (the stream has then failed; the next push reports
// it). A provisional limit (the hello's) holds a later frame over it
// instead of failing (held()).
void FramerSetMax(const FunctionCallbackInfo<Value>& args) {
  auto* self = static_cast<FramerWrap*>(GetWrapped(args.This()));
  if (self == nullptr) return;
  if (!args[0]->IsNumber() || !(args[0].As<Number>()->Value() >= 0)) {
    ThrowCodedError(AddonData::From(args), args.GetIsolate()->GetCurrentContext(), "ERR_PROCWIRE_INVALID_ARG",
                    "maxMessageSize must be a non-negative number");
    return;
  }
  const double max = args[0].As<Number>()->Value();
  const FramingError e = self->reader.SetMaxPayloadSize(
      max >= 18446744073709551615.0 ? SIZE_MAX : static_cast<size_t>(max), args[1]->IsTrue());
  args.GetReturnValue().Set(e == FramingError::kNone);
}

void FramerBuffering(const FunctionCallbackInfo<Value>& args) {
  auto* self = static_cast<FramerWrap*>(GetWrapped(args.This()));
  CHECK_NOT_NULL(self);
  args.GetReturnValue().Set(static_cast<double>(self->reader.buffered()));
}

}  // namespace

void InitFramerWrap(AddonData* data, Local<Context> context, Local<Object> exports) {
  Isolate* isolate = data->isolate;
  Local<v8::External> external = v8::External::New(isolate, data);
  Local<FunctionTemplate> framer = FunctionTemplate::New(isolate, FramerNew, external);
  framer->SetClassName(OneByteString(isolate, "NativeFramer"));
  framer->InstanceTemplate()->SetInternalFieldCount(1);
  framer->PrototypeTemplate()->Set(OneByteString(isolate, "push"),
                                   FunctionTemplate::New(isolate, FramerPush, external));
  framer->PrototypeTemplate()->Set(OneByteString(isolate, "setMaxMessageSize"),
                                   FunctionTemplate::New(isolate, FramerSetMax, external));
  framer->PrototypeTemplate()->Set(OneByteString(isolate, "held"),
                                   FunctionTemplate::New(isolate, FramerHeld, external));
  framer->PrototypeTemplate()->Set(OneByteString(isolate, "pushHeld"),
                                   FunctionTemplate::New(isolate, FramerPushHeld, external));
  framer->PrototypeTemplate()->Set(OneByteString(isolate, "buffering"),
                                   FunctionTemplate::New(isolate, FramerBuffering, external));
  exports->Set(context, OneByteString(isolate, "NativeFramer"), framer->GetFunction(context).ToLocalChecked())
      .Check();
}

}  // namespace procwire
