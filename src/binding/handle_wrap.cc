#include "handle_wrap.h"

namespace procwire {

using v8::Context;
using v8::FunctionCallbackInfo;
using v8::FunctionTemplate;
using v8::Global;
using v8::HandleScope;
using v8::Isolate;
using v8::Local;
using v8::Object;
using v8::Value;

HandleWrap::HandleWrap(AddonData* data, Local<Context> context, Local<Object> wrapper, const char* async_name)
    : data_(data) {
  Isolate* isolate = data->isolate;
  context_.Reset(isolate, context);
  wrapper_.Reset(isolate, wrapper);
  SetWrapped(wrapper, static_cast<HandleWrap*>(this));
  async_context_ = node::EmitAsyncInit(isolate, wrapper, async_name);
  data->open_handles.insert(this);
}

HandleWrap::~HandleWrap() {
  if (teardown_) return;
  Isolate* isolate = data_->isolate;
  HandleScope scope(isolate);
  SetWrapped(wrapper_.Get(isolate), nullptr);
  node::EmitAsyncDestroy(isolate, async_context_);
}

void HandleWrap::AttachUvHandle(uv_handle_t* handle) {
  handle->data = static_cast<HandleWrap*>(this);
  open_uv_handles_++;
}

void HandleWrap::StartClose() {
  if (closing_) return;
  closing_ = true;
  data_->open_handles.erase(this);
  data_->closing_handles++;
  CloseUvHandles();
}

void HandleWrap::OnUvHandleClosed(uv_handle_t* handle) {
  HandleWrap* self = static_cast<HandleWrap*>(handle->data);
  if (--self->open_uv_handles_ > 0) return;
  AddonData* data = self->data_;
  delete self;
  data->HandleClosed();
}

void HandleWrap::CloseForTeardown() {
  // The environment is going away: no JavaScript may run, and the close
  // callbacks may come after the isolate is gone, so every V8 handle is
  // released now, while the isolate still exists.
  teardown_ = true;
  ReleaseV8Handles();
  context_.Reset();
  wrapper_.Reset();
  StartClose();
}

void HandleWrap::Call(const Global<v8::Function>& fn, int argc, Local<Value>* argv) {
  if (teardown_) return;
  Isolate* isolate = data_->isolate;
  (void)node::MakeCallback(isolate, wrapper_.Get(isolate), fn.Get(isolate), argc, argv, async_context_);
}

void HandleWrap::Ref(const FunctionCallbackInfo<Value>& args) {
  HandleWrap* self = Unwrap<HandleWrap>(args);
  CHECK_NOT_NULL(self);
  uv_ref(self->ref_handle());
}

void HandleWrap::Unref(const FunctionCallbackInfo<Value>& args) {
  HandleWrap* self = Unwrap<HandleWrap>(args);
  CHECK_NOT_NULL(self);
  uv_unref(self->ref_handle());
}

void HandleWrap::Close(const FunctionCallbackInfo<Value>& args) {
  HandleWrap* self = Unwrap<HandleWrap>(args);
  if (self != nullptr) self->StartClose();
}

void SetMethod(Isolate* isolate, Local<FunctionTemplate> t, Local<v8::External> data, const char* name,
               v8::FunctionCallback fn) {
  t->PrototypeTemplate()->Set(OneByteString(isolate, name), FunctionTemplate::New(isolate, fn, data));
}

}  // namespace procwire
