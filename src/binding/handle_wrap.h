// HandleWrap: the base of every wrapped object that owns libuv handles and a
// descriptor (NativeChannel, NativeListener), after Node's own HandleWrap.
//
// Ownership and lifetime: the object owns itself while it is open: it is in
// AddonData::open_handles and keeps its JS wrapper alive through a strong
// Global, so a wrapper that JavaScript dropped cannot free an object whose
// descriptor still has callbacks coming. StartClose() (the JS close(), or
// environment teardown) uv_closes each of its libuv handles; when the last
// close callback has run the object is deleted, and its destructor clears the
// wrapper's internal field, so calls on a closed handle find nullptr and are
// refused by the JS layer before reaching here.
// Threading: the environment's thread only.
#ifndef PROCWIRE_BINDING_HANDLE_WRAP_H_
#define PROCWIRE_BINDING_HANDLE_WRAP_H_

#include <node.h>
#include <uv.h>
#include <v8.h>

#include "addon_data.h"
#include "check.h"

namespace procwire {

class HandleWrap : public Closable {
 public:
  // The wrapped object behind a method's receiver; nullptr once closed.
  template <typename T>
  static T* Unwrap(const v8::FunctionCallbackInfo<v8::Value>& args) {
    return static_cast<T*>(static_cast<HandleWrap*>(GetWrapped(args.This())));
  }

  // The JS methods every handle shares: ref(), unref(), close().
  static void Ref(const v8::FunctionCallbackInfo<v8::Value>& args);
  static void Unref(const v8::FunctionCallbackInfo<v8::Value>& args);
  static void Close(const v8::FunctionCallbackInfo<v8::Value>& args);

  // Starts closing (once): the object leaves the open set and is deleted
  // after the last of its libuv handles has closed.
  void StartClose();

  void CloseForTeardown() override;

 protected:
  // async_name is the async_hooks type of the object's callbacks.
  HandleWrap(AddonData* data, v8::Local<v8::Context> context, v8::Local<v8::Object> wrapper,
             const char* async_name);
  ~HandleWrap() override;

  // Takes a libuv handle into this object's lifetime: handle->data points
  // here, and the object is only freed once that handle has closed too.
  void AttachUvHandle(uv_handle_t* handle);
  // The wrapped object behind a libuv handle attached above.
  template <typename T>
  static T* FromUvHandle(void* handle_data) {
    return static_cast<T*>(static_cast<HandleWrap*>(handle_data));
  }

  // The libuv handle that decides whether the object keeps the loop alive.
  virtual uv_handle_t* ref_handle() = 0;
  // Stops the object's libuv handles and uv_closes every attached one with
  // OnUvHandleClosed.
  virtual void CloseUvHandles() = 0;
  // Releases the subclass's own V8 handles (environment teardown, while
  // the isolate still exists). The base releases its own afterwards.
  virtual void ReleaseV8Handles() {}

  static void OnUvHandleClosed(uv_handle_t* handle);

  // Calls fn on the wrapper through node::MakeCallback, which drains the
  // nextTick and microtask queues afterwards as for any I/O callback (a
  // throwing handler becomes an uncaught exception). Nothing runs during
  // teardown.
  void Call(const v8::Global<v8::Function>& fn, int argc, v8::Local<v8::Value>* argv);

  AddonData* data_;
  bool closing_ = false;
  bool teardown_ = false;
  node::async_context async_context_;
  v8::Global<v8::Context> context_;
  v8::Global<v8::Object> wrapper_;

 private:
  int open_uv_handles_ = 0;
};

// Adds a method to a class template's prototype.
void SetMethod(v8::Isolate* isolate, v8::Local<v8::FunctionTemplate> t, v8::Local<v8::External> data,
               const char* name, v8::FunctionCallback fn);

}  // namespace procwire

#endif  // PROCWIRE_BINDING_HANDLE_WRAP_H_
