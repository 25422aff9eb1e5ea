#include "functions.h"

#include <node.h>
#include <node_buffer.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "../core/frame_reader.h"
#include "../core/socket_io.h"
#include "check.h"
#include "codec.h"
#include "payload_memory.h"
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

WireFormat FormatArg(Local<Value> v) {
  CHECK(v->IsInt32());
  return v.As<Integer>()->Value() == 1 ? WireFormat::kJson : WireFormat::kAdvanced;
}

namespace {

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

std::string StringArg(Isolate* isolate, Local<Value> v) {
  CHECK(v->IsString());
  String::Utf8Value s(isolate, v);
  return std::string(*s, s.length());
}

// Every function here that can fail returns its result or, for a failed
// system call, the errno's name (a string: "EADDRINUSE"); see ErrnoName.

// socketPair() -> [parentFd, childFd] or an errno name
void SocketPair(const FunctionCallbackInfo<Value>& args) {
  Isolate* isolate = args.GetIsolate();
  int fds[2];
  const int r = MakeSocketPair(fds);
  if (r < 0) {
    args.GetReturnValue().Set(ErrnoName(isolate, -r));
    return;
  }
  Local<Value> pair[] = {Integer::New(isolate, fds[0]), Integer::New(isolate, fds[1])};
  args.GetReturnValue().Set(Array::New(isolate, pair, 2));
}

// widenSendBuffer(fd): a unix socket's send buffer grows to
// kUnixSendBufferSize (a plain Node child's end of its socketpair, whose
// writes Node's own channel makes).
void WidenSendBufferJs(const FunctionCallbackInfo<Value>& args) {
  CHECK(args[0]->IsInt32());
  WidenUnixSendBuffer(args[0].As<Integer>()->Value());
}

void CloseFdJs(const FunctionCallbackInfo<Value>& args) {
  CHECK(args[0]->IsInt32());
  CloseFd(args[0].As<Integer>()->Value());
}

// setBlocking(fd, blocking) -> true or an errno name
void SetBlocking(const FunctionCallbackInfo<Value>& args) {
  CHECK(args[0]->IsInt32());
  const int r = SetNonBlocking(args[0].As<Integer>()->Value(), !args[1]->IsTrue());
  if (r < 0) {
    args.GetReturnValue().Set(ErrnoName(args.GetIsolate(), -r));
    return;
  }
  args.GetReturnValue().Set(true);
}

// listenUnix(path, abstract, backlog) -> fd or an errno name
void ListenUnixJs(const FunctionCallbackInfo<Value>& args) {
  CHECK(args[2]->IsInt32());
  const int fd =
      ListenUnix(StringArg(args.GetIsolate(), args[0]), args[1]->IsTrue(), args[2].As<Integer>()->Value());
  if (fd < 0) {
    args.GetReturnValue().Set(ErrnoName(args.GetIsolate(), -fd));
    return;
  }
  args.GetReturnValue().Set(fd);
}

// connectUnix(path, abstract) -> [fd, inProgress] or an errno name
void ConnectUnixJs(const FunctionCallbackInfo<Value>& args) {
  Isolate* isolate = args.GetIsolate();
  bool in_progress = false;
  const int fd = ConnectUnix(StringArg(isolate, args[0]), args[1]->IsTrue(), &in_progress);
  if (fd < 0) {
    args.GetReturnValue().Set(ErrnoName(isolate, -fd));
    return;
  }
  Local<Value> out[] = {Integer::New(isolate, fd), v8::Boolean::New(isolate, in_progress)};
  args.GetReturnValue().Set(Array::New(isolate, out, 2));
}

// listenTcp(host, port, backlog) -> [fd, port] or an errno name
void ListenTcpJs(const FunctionCallbackInfo<Value>& args) {
  Isolate* isolate = args.GetIsolate();
  CHECK(args[1]->IsInt32() && args[2]->IsInt32());
  int port = 0;
  const int fd = ListenTcp(StringArg(isolate, args[0]), args[1].As<Integer>()->Value(),
                           args[2].As<Integer>()->Value(), &port);
  if (fd < 0) {
    args.GetReturnValue().Set(ErrnoName(isolate, -fd));
    return;
  }
  Local<Value> out[] = {Integer::New(isolate, fd), Integer::New(isolate, port)};
  args.GetReturnValue().Set(Array::New(isolate, out, 2));
}

// connectTcp(host, port) -> [fd, inProgress] or an errno name
void ConnectTcpJs(const FunctionCallbackInfo<Value>& args) {
  Isolate* isolate = args.GetIsolate();
  CHECK(args[1]->IsInt32());
  bool in_progress = false;
  const int fd = ConnectTcp(StringArg(isolate, args[0]), args[1].As<Integer>()->Value(), &in_progress);
  if (fd < 0) {
    args.GetReturnValue().Set(ErrnoName(isolate, -fd));
    return;
  }
  Local<Value> out[] = {Integer::New(isolate, fd), v8::Boolean::New(isolate, in_progress)};
  args.GetReturnValue().Set(Array::New(isolate, out, 2));
}

// peerCredentials(fd) -> [pid, uid, gid] or an errno name
void PeerCredentialsJs(const FunctionCallbackInfo<Value>& args) {
  Isolate* isolate = args.GetIsolate();
  CHECK(args[0]->IsInt32());
  PeerCredentials cred;
  const int r = GetPeerCredentials(args[0].As<Integer>()->Value(), &cred);
  if (r < 0) {
    args.GetReturnValue().Set(ErrnoName(isolate, -r));
    return;
  }
  Local<Value> out[] = {Integer::New(isolate, cred.pid), Integer::New(isolate, cred.uid),
                        Integer::New(isolate, cred.gid)};
  args.GetReturnValue().Set(Array::New(isolate, out, 3));
}

// alloc(size) -> Buffer over a fresh shared-memory segment, or an errno name.
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
    args.GetReturnValue().Set(ErrnoName(isolate, error != 0 ? error : ENOMEM));
  }
}

// releaseSegment(arrayBuffer) -> true when it was over a peer's recycled
// segment and is now detached (the segment goes back to its sender).
void ReleaseSegment(const FunctionCallbackInfo<Value>& args) {
  const bool released = args[0]->IsArrayBuffer() && ReleaseReceivedSegment(args[0].As<v8::ArrayBuffer>());
  args.GetReturnValue().Set(released);
}

void SetFunction(Isolate* isolate, Local<Context> context, Local<Object> target, Local<v8::External> data,
                 const char* name, v8::FunctionCallback fn) {
  Local<Function> f = FunctionTemplate::New(isolate, fn, data)->GetFunction(context).ToLocalChecked();
  f->SetName(OneByteString(isolate, name));
  target->Set(context, OneByteString(isolate, name), f).Check();
}

}  // namespace

void InitFunctions(AddonData* data, Local<Context> context, Local<Object> exports) {
  Isolate* isolate = data->isolate;
  Local<v8::External> external = v8::External::New(isolate, data);
  SetFunction(isolate, context, exports, external, "setup", Setup);
  SetFunction(isolate, context, exports, external, "encode", Encode);
  SetFunction(isolate, context, exports, external, "decode", Decode);
  SetFunction(isolate, context, exports, external, "writeString", WriteString);
  SetFunction(isolate, context, exports, external, "readOneByteString", ReadOneByteString);
  SetFunction(isolate, context, exports, external, "socketPair", SocketPair);
  SetFunction(isolate, context, exports, external, "closeFd", CloseFdJs);
  SetFunction(isolate, context, exports, external, "widenSendBuffer", WidenSendBufferJs);
  SetFunction(isolate, context, exports, external, "setBlocking", SetBlocking);
  SetFunction(isolate, context, exports, external, "listenUnix", ListenUnixJs);
  SetFunction(isolate, context, exports, external, "connectUnix", ConnectUnixJs);
  SetFunction(isolate, context, exports, external, "listenTcp", ListenTcpJs);
  SetFunction(isolate, context, exports, external, "connectTcp", ConnectTcpJs);
  SetFunction(isolate, context, exports, external, "peerCredentials", PeerCredentialsJs);
  SetFunction(isolate, context, exports, external, "alloc", Alloc);
  SetFunction(isolate, context, exports, external, "releaseSegment", ReleaseSegment);
}

}  // namespace procwire
