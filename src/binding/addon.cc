// The addon's entry point: context-aware (NODE_MODULE_INIT), so it loads in
// worker_threads and in several realms, each with its own AddonData.
#include <node.h>
#include <node_buffer.h>
#include <uv.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "../core/frame_reader.h"
#include "../core/socket_io.h"
#include "addon_data.h"
#include "check.h"
#include "channel.h"
#include "codec.h"
#include "segments.h"

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

AddonData::AddonData(Isolate* isolate_) : isolate(isolate_), loop(node::GetCurrentEventLoop(isolate_)) {}

AddonData::~AddonData() = default;

Local<String> OneByteString(Isolate* isolate, const char* s) {
  return String::NewFromOneByte(isolate, reinterpret_cast<const uint8_t*>(s),
                                v8::NewStringType::kInternalized)
      .ToLocalChecked();
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

namespace {

WireFormat FormatArg(Local<Value> v) {
  CHECK(v->IsInt32());
  return v.As<Integer>()->Value() == 1 ? WireFormat::kJson : WireFormat::kAdvanced;
}

// setup(Buffer, makeError): called once by lib/ before anything else.
void Setup(const FunctionCallbackInfo<Value>& args) {
  AddonData* data = AddonData::From(args);
  CHECK(args[0]->IsFunction() && args[1]->IsFunction());
  data->buffer_constructor.Reset(args.GetIsolate(), args[0].As<Function>());
  data->make_error.Reset(args.GetIsolate(), args[1].As<Function>());
}

void FreeFrame(char* data, void* /*hint*/) { std::free(data); }

// encode(format, value) -> Buffer holding one whole frame.
void Encode(const FunctionCallbackInfo<Value>& args) {
  AddonData* data = AddonData::From(args);
  Isolate* isolate = args.GetIsolate();
  Local<Context> context = isolate->GetCurrentContext();
  EncodedFrame frame;
  if (!EncodeFrame(data, context, FormatArg(args[0]), args[1], &frame)) return;
  Local<Object> buf;
  if (node::Buffer::New(isolate, reinterpret_cast<char*>(frame.data), frame.size, FreeFrame, nullptr)
          .ToLocal(&buf)) {
    args.GetReturnValue().Set(buf);
  }
}

// Payload memory inside a JS view: decoded views may alias its ArrayBuffer.
class ViewMemory final : public PayloadMemory {
 public:
  explicit ViewMemory(Local<ArrayBuffer> ab) : ab_(ab), base_(static_cast<const uint8_t*>(ab->Data())) {}
  const uint8_t* base() const override { return base_; }
  MaybeLocal<ArrayBuffer> GetArrayBuffer(Isolate*) override { return ab_; }

 private:
  Local<ArrayBuffer> ab_;
  const uint8_t* base_;
};

// decode(format, view) -> value (payload only: no length header, no '\n').
void Decode(const FunctionCallbackInfo<Value>& args) {
  AddonData* data = AddonData::From(args);
  Isolate* isolate = args.GetIsolate();
  Local<Context> context = isolate->GetCurrentContext();
  const WireFormat format = FormatArg(args[0]);
  CHECK(args[1]->IsArrayBufferView());
  Local<ArrayBufferView> view = args[1].As<ArrayBufferView>();
  Local<ArrayBuffer> ab = view->Buffer();
  ViewMemory memory(ab);
  const uint8_t* payload = static_cast<const uint8_t*>(ab->Data()) + view->ByteOffset();
  Local<Value> out;
  if (DecodePayload(data, context, format, payload, view->ByteLength(), &memory, &out)) {
    args.GetReturnValue().Set(out);
  }
}

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

// push(view) -> [messages, errors | undefined, fatal | undefined], where
// errors is a flat list of (index, error): the bad frame came just before
// messages[index].
void FramerPush(const FunctionCallbackInfo<Value>& args) {
  AddonData* data = AddonData::From(args);
  Isolate* isolate = args.GetIsolate();
  Local<Context> context = isolate->GetCurrentContext();
  auto* self = static_cast<FramerWrap*>(GetWrapped(args.This()));
  CHECK_NOT_NULL(self);
  CHECK(args[0]->IsArrayBufferView());
  Local<ArrayBufferView> view = args[0].As<ArrayBufferView>();
  Local<ArrayBuffer> ab = view->Buffer();
  ViewMemory memory(ab);
  const uint8_t* chunk = static_cast<const uint8_t*>(ab->Data()) + view->ByteOffset();
  std::vector<Local<Value>> messages;
  std::vector<Local<Value>> errors;
  const WireFormat format = self->reader.format();
  v8::TryCatch try_catch(isolate);
  const FramingError fe = self->reader.Push(chunk, view->ByteLength(), [&](const FrameReader::Frame& frame) {
    Local<Value> value;
    if (DecodePayload(data, context, format, frame.data, frame.size, frame.in_place ? &memory : nullptr,
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

// setMaxMessageSize(n) -> false when a frame already buffered is over n
// (the stream has then failed; the next push reports it).
void FramerSetMax(const FunctionCallbackInfo<Value>& args) {
  auto* self = static_cast<FramerWrap*>(GetWrapped(args.This()));
  if (self == nullptr) return;
  if (!args[0]->IsNumber() || !(args[0].As<Number>()->Value() >= 0)) {
    ThrowCodedError(AddonData::From(args), args.GetIsolate()->GetCurrentContext(), "ERR_PROCWIRE_INVALID_ARG",
                    "maxMessageSize must be a non-negative number");
    return;
  }
  const double max = args[0].As<Number>()->Value();
  const FramingError e =
      self->reader.SetMaxPayloadSize(max >= 18446744073709551615.0 ? SIZE_MAX : static_cast<size_t>(max));
  args.GetReturnValue().Set(e == FramingError::kNone);
}

void FramerBuffering(const FunctionCallbackInfo<Value>& args) {
  auto* self = static_cast<FramerWrap*>(GetWrapped(args.This()));
  CHECK_NOT_NULL(self);
  args.GetReturnValue().Set(static_cast<double>(self->reader.buffered()));
}

std::string StringArg(Isolate* isolate, Local<Value> v) {
  CHECK(v->IsString());
  String::Utf8Value s(isolate, v);
  return std::string(*s, s.length());
}

// socketPair() -> [parentFd, childFd] or -errno
void SocketPair(const FunctionCallbackInfo<Value>& args) {
  Isolate* isolate = args.GetIsolate();
  int fds[2];
  const int r = MakeSocketPair(fds);
  if (r < 0) {
    args.GetReturnValue().Set(r);
    return;
  }
  Local<Value> pair[] = {Integer::New(isolate, fds[0]), Integer::New(isolate, fds[1])};
  args.GetReturnValue().Set(Array::New(isolate, pair, 2));
}

void CloseFdJs(const FunctionCallbackInfo<Value>& args) {
  CHECK(args[0]->IsInt32());
  CloseFd(args[0].As<Integer>()->Value());
}

void SetBlocking(const FunctionCallbackInfo<Value>& args) {
  CHECK(args[0]->IsInt32());
  args.GetReturnValue().Set(SetNonBlocking(args[0].As<Integer>()->Value(), !args[1]->IsTrue()));
}

// listenUnix(path, abstract, backlog) -> fd or -errno
void ListenUnixJs(const FunctionCallbackInfo<Value>& args) {
  CHECK(args[2]->IsInt32());
  args.GetReturnValue().Set(
      ListenUnix(StringArg(args.GetIsolate(), args[0]), args[1]->IsTrue(), args[2].As<Integer>()->Value()));
}

// connectUnix(path, abstract) -> [fd, inProgress] or -errno
void ConnectUnixJs(const FunctionCallbackInfo<Value>& args) {
  Isolate* isolate = args.GetIsolate();
  bool in_progress = false;
  const int fd = ConnectUnix(StringArg(isolate, args[0]), args[1]->IsTrue(), &in_progress);
  if (fd < 0) {
    args.GetReturnValue().Set(fd);
    return;
  }
  Local<Value> out[] = {Integer::New(isolate, fd), v8::Boolean::New(isolate, in_progress)};
  args.GetReturnValue().Set(Array::New(isolate, out, 2));
}

// listenTcp(host, port, backlog) -> [fd, port] or -errno
void ListenTcpJs(const FunctionCallbackInfo<Value>& args) {
  Isolate* isolate = args.GetIsolate();
  CHECK(args[1]->IsInt32() && args[2]->IsInt32());
  int port = 0;
  const int fd = ListenTcp(StringArg(isolate, args[0]), args[1].As<Integer>()->Value(),
                           args[2].As<Integer>()->Value(), &port);
  if (fd < 0) {
    args.GetReturnValue().Set(fd);
    return;
  }
  Local<Value> out[] = {Integer::New(isolate, fd), Integer::New(isolate, port)};
  args.GetReturnValue().Set(Array::New(isolate, out, 2));
}

// connectTcp(host, port) -> [fd, inProgress] or -errno
void ConnectTcpJs(const FunctionCallbackInfo<Value>& args) {
  Isolate* isolate = args.GetIsolate();
  CHECK(args[1]->IsInt32());
  bool in_progress = false;
  const int fd = ConnectTcp(StringArg(isolate, args[0]), args[1].As<Integer>()->Value(), &in_progress);
  if (fd < 0) {
    args.GetReturnValue().Set(fd);
    return;
  }
  Local<Value> out[] = {Integer::New(isolate, fd), v8::Boolean::New(isolate, in_progress)};
  args.GetReturnValue().Set(Array::New(isolate, out, 2));
}

// peerCredentials(fd) -> [pid, uid, gid] or -errno
void PeerCredentialsJs(const FunctionCallbackInfo<Value>& args) {
  Isolate* isolate = args.GetIsolate();
  CHECK(args[0]->IsInt32());
  PeerCredentials cred;
  const int r = GetPeerCredentials(args[0].As<Integer>()->Value(), &cred);
  if (r < 0) {
    args.GetReturnValue().Set(r);
    return;
  }
  Local<Value> out[] = {Integer::New(isolate, cred.pid), Integer::New(isolate, cred.uid),
                        Integer::New(isolate, cred.gid)};
  args.GetReturnValue().Set(Array::New(isolate, out, 3));
}

// alloc(size) -> Buffer over a fresh shared-memory segment, or -errno.
void Alloc(const FunctionCallbackInfo<Value>& args) {
  Isolate* isolate = args.GetIsolate();
  CHECK(args[0]->IsNumber());
  const double size = args[0].As<Number>()->Value();
  CHECK(size >= 0);
  int error = 0;
  Local<Object> buf;
  if (AllocateSegmentBuffer(isolate, static_cast<size_t>(size), &error).ToLocal(&buf)) {
    args.GetReturnValue().Set(buf);
  } else {
    args.GetReturnValue().Set(-error);
  }
}

void Teardown(void* arg) {
  AddonData* data = static_cast<AddonData*>(arg);
  data->tearing_down = true;
  // Copy: closing removes entries from the set.
  std::vector<Closable*> open(data->open_handles.begin(), data->open_handles.end());
  for (Closable* h : open) h->CloseForTeardown();
  // This object may outlive the isolate (until the last close callback), so
  // its V8 handles go now.
  data->buffer_constructor.Reset();
  data->make_error.Reset();
  data->channel_template.Reset();
  data->listener_template.Reset();
  // Freed now, or by the last close callback (AddonData::HandleClosed).
  if (data->closing_handles == 0) delete data;
}

void SetFunction(Isolate* isolate, Local<Context> context, Local<Object> target, Local<v8::External> data,
                 const char* name, v8::FunctionCallback fn) {
  Local<Function> f = FunctionTemplate::New(isolate, fn, data)->GetFunction(context).ToLocalChecked();
  f->SetName(OneByteString(isolate, name));
  target->Set(context, OneByteString(isolate, name), f).Check();
}

}  // namespace

}  // namespace procwire

NODE_MODULE_INIT(/* exports, module, context */) {
  using namespace procwire;
  Isolate* isolate = Isolate::GetCurrent();
  AddonData* data = new AddonData(isolate);
  node::AddEnvironmentCleanupHook(isolate, Teardown, data);
  Local<v8::External> external = v8::External::New(isolate, data);

  SetFunction(isolate, context, exports, external, "setup", Setup);
  SetFunction(isolate, context, exports, external, "encode", Encode);
  SetFunction(isolate, context, exports, external, "decode", Decode);
  SetFunction(isolate, context, exports, external, "arrayExtraKeys", ArrayExtraKeys);
  SetFunction(isolate, context, exports, external, "socketPair", SocketPair);
  SetFunction(isolate, context, exports, external, "closeFd", CloseFdJs);
  SetFunction(isolate, context, exports, external, "setBlocking", SetBlocking);
  SetFunction(isolate, context, exports, external, "listenUnix", ListenUnixJs);
  SetFunction(isolate, context, exports, external, "connectUnix", ConnectUnixJs);
  SetFunction(isolate, context, exports, external, "listenTcp", ListenTcpJs);
  SetFunction(isolate, context, exports, external, "connectTcp", ConnectTcpJs);
  SetFunction(isolate, context, exports, external, "peerCredentials", PeerCredentialsJs);
  SetFunction(isolate, context, exports, external, "alloc", Alloc);

  Local<FunctionTemplate> framer = FunctionTemplate::New(isolate, FramerNew, external);
  framer->SetClassName(OneByteString(isolate, "NativeFramer"));
  framer->InstanceTemplate()->SetInternalFieldCount(1);
  framer->PrototypeTemplate()->Set(OneByteString(isolate, "push"),
                                   FunctionTemplate::New(isolate, FramerPush, external));
  framer->PrototypeTemplate()->Set(OneByteString(isolate, "setMaxMessageSize"),
                                   FunctionTemplate::New(isolate, FramerSetMax, external));
  framer->PrototypeTemplate()->Set(OneByteString(isolate, "buffering"),
                                   FunctionTemplate::New(isolate, FramerBuffering, external));
  exports->Set(context, OneByteString(isolate, "NativeFramer"), framer->GetFunction(context).ToLocalChecked())
      .Check();

  InitChannel(data, context, exports);
}
