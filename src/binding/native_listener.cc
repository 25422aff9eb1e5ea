#include "native_listener.h"

#include <node.h>
#include <uv.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <vector>

#include "../core/socket_io.h"
#include "handle_wrap.h"

namespace procwire {

using v8::Array;
using v8::ArrayBuffer;
using v8::BackingStore;
using v8::Context;
using v8::Function;
using v8::FunctionCallbackInfo;
using v8::FunctionTemplate;
using v8::Global;
using v8::HandleScope;
using v8::Integer;
using v8::Isolate;
using v8::Local;
using v8::MaybeLocal;
using v8::Number;
using v8::Object;
using v8::Value;

namespace {

class NativeListener final : public HandleWrap {
 public:
  NativeListener(AddonData* data, Local<Context> context, Local<Object> wrapper, int fd,
                 Local<Function> on_connection)
      : HandleWrap(data, context, wrapper, "PROCWIRE_LISTENER"), fd_(fd) {
    Isolate* isolate = data->isolate;
    on_connection_.Reset(isolate, on_connection);
    CHECK_EQ(uv_poll_init_socket(data->loop, &poll_, fd), 0);
    AttachUvHandle(reinterpret_cast<uv_handle_t*>(&poll_));
    CHECK_EQ(uv_poll_start(&poll_, UV_READABLE, OnPoll), 0);
    CHECK_EQ(uv_timer_init(data->loop, &backoff_), 0);
    AttachUvHandle(reinterpret_cast<uv_handle_t*>(&backoff_));
    // The timer only runs during a back-off, and the poll handle alone
    // decides whether the listener keeps the process alive.
    uv_unref(reinterpret_cast<uv_handle_t*>(&backoff_));
    reserve_fd_ = OpenReserve();
  }

  // new Listener(fd, onconnection(fds[], errnoName | undefined)): an accept
  // that failed (EMFILE and friends) comes with its errno's name.
  static void New(const FunctionCallbackInfo<Value>& args) {
    AddonData* data = AddonData::From(args);
    Local<Context> context = args.GetIsolate()->GetCurrentContext();
    struct stat st;
    if (!args.IsConstructCall() || !args[0]->IsInt32() || !args[1]->IsFunction() ||
        fstat(args[0].As<Integer>()->Value(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
      ThrowCodedError(data, context, "ERR_PROCWIRE_INVALID_ARG",
                      "new NativeListener(fd, onconnection): fd must be a listening socket");
      return;
    }
    new NativeListener(AddonData::From(args), args.GetIsolate()->GetCurrentContext(), args.This(),
                       args[0].As<Integer>()->Value(), args[1].As<Function>());
  }
  uv_handle_t* ref_handle() override { return reinterpret_cast<uv_handle_t*>(&poll_); }

  void ReleaseV8Handles() override { on_connection_.Reset(); }

 private:
  // A descriptor kept in reserve for running out of them (as libuv does):
  // on EMFILE/ENFILE it is closed, so that pending connections can be
  // accepted and closed at once instead of waking us in a loop.
  static int OpenReserve() { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

  // Out of descriptors: refuse what is pending (their peers see a close
  // rather than hanging in the backlog), then stop polling for a while so a
  // full table does not spin the loop; polling resumes after the back-off.
  void ShedConnections() {
    if (reserve_fd_ >= 0) {
      CloseFd(reserve_fd_);
      reserve_fd_ = -1;
      for (int i = 0; i < 1024; i++) {
        const int fd = AcceptConnection(fd_);
        if (fd < 0) break;
        CloseFd(fd);
      }
      reserve_fd_ = OpenReserve();
    }
    uv_poll_stop(&poll_);
    uv_timer_start(&backoff_, OnBackoffDone, kBackoffMs, 0);
  }

  static void OnBackoffDone(uv_timer_t* timer) {
    NativeListener* self = FromUvHandle<NativeListener>(timer->data);
    if (self->closing_) return;
    if (self->reserve_fd_ < 0) self->reserve_fd_ = OpenReserve();
    uv_poll_start(&self->poll_, UV_READABLE, OnPoll);
  }

  static void OnPoll(uv_poll_t* handle, int status, int /*events*/) {
    NativeListener* self = FromUvHandle<NativeListener>(handle->data);
    if (self->closing_) return;
    Isolate* isolate = self->data_->isolate;
    HandleScope scope(isolate);
    Local<Context> context = self->context_.Get(isolate);
    Context::Scope context_scope(context);
    std::vector<Local<Value>> fds;
    int error = status < 0 ? status : 0;
    // Accept what is pending, up to a batch, so a connection storm cannot
    // starve the loop.
    for (int i = 0; i < 64 && error == 0; i++) {
      const int fd = AcceptConnection(self->fd_);
      if (fd == -EAGAIN || fd == -EWOULDBLOCK) break;
      if (fd < 0) {
        // EMFILE and friends: report (JavaScript rate-limits it), keep
        // listening after a back-off.
        error = fd;
        if (fd == -EMFILE || fd == -ENFILE || fd == -ENOBUFS || fd == -ENOMEM) self->ShedConnections();
        break;
      }
      fds.push_back(Integer::New(isolate, fd));
    }
    Local<Value> argv[] = {
        Array::New(isolate, fds.data(), fds.size()),
        error < 0 ? Local<Value>(ErrnoName(isolate, -error)) : Local<Value>(v8::Undefined(isolate))};
    self->Call(self->on_connection_, 2, argv);
  }

  // Two libuv handles: the object goes when the second has closed.
  void CloseUvHandles() override {
    uv_poll_stop(&poll_);
    uv_timer_stop(&backoff_);
    uv_close(reinterpret_cast<uv_handle_t*>(&poll_), OnUvHandleClosed);
    uv_close(reinterpret_cast<uv_handle_t*>(&backoff_), OnUvHandleClosed);
  }

  ~NativeListener() override {
    CloseFd(fd_);
    CloseFd(reserve_fd_);
  }

  static constexpr uint64_t kBackoffMs = 100;

  int fd_;
  int reserve_fd_ = -1;
  uv_poll_t poll_;
  uv_timer_t backoff_;
  Global<Function> on_connection_;
};

}  // namespace

void InitNativeListener(AddonData* data, Local<Context> context, Local<Object> exports) {
  Isolate* isolate = data->isolate;
  Local<v8::External> external = v8::External::New(isolate, data);
  Local<FunctionTemplate> ls = FunctionTemplate::New(isolate, NativeListener::New, external);
  ls->SetClassName(OneByteString(isolate, "NativeListener"));
  ls->InstanceTemplate()->SetInternalFieldCount(1);
  SetMethod(isolate, ls, external, "close", HandleWrap::Close);
  SetMethod(isolate, ls, external, "ref", HandleWrap::Ref);
  SetMethod(isolate, ls, external, "unref", HandleWrap::Unref);
  exports->Set(context, OneByteString(isolate, "NativeListener"), ls->GetFunction(context).ToLocalChecked())
      .Check();
}

}  // namespace procwire
