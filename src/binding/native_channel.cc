// NativeChannel: New(), argument checks, the method table, OnPoll (pure
// dispatch to the collaborators) and the channel's end (see
// native_channel_impl.h for the collaborators).
#include "native_channel_impl.h"

namespace procwire {

NativeChannel::NativeChannel(AddonData* data, Local<Context> context, Local<Object> wrapper, int fd,
                             WireFormat format, size_t max_message_size, bool connecting,
                             Local<Object> callbacks, double ool_threshold)
    : HandleWrap(data, context, wrapper, "PROCWIRE_CHANNEL"),
      fd_(fd),
      phase_(connecting ? Phase::kConnecting : Phase::kOpen),
      framer_(format, max_message_size),
      configured_max_message_size_(max_message_size),
      writer_(this),
      reader_(this),
      batch_(this),
      rings_(this, format, max_message_size),
      segments_(this, ool_threshold >= 0 && format == WireFormat::kAdvanced,
                ool_threshold >= 0 ? static_cast<size_t>(ool_threshold) : SIZE_MAX),
      spin_(this) {
  data->open_channels++;
  Isolate* isolate = data->isolate;
  batch_.SetOnRead(GetFunction(context, callbacks, "onread"));
  on_write_.Reset(isolate, GetFunction(context, callbacks, "onwrite"));
  on_end_.Reset(isolate, GetFunction(context, callbacks, "onend"));
  on_connect_.Reset(isolate, GetFunction(context, callbacks, "onconnect"));
  Local<Value> on_return;
  if (callbacks->Get(context, OneByteString(isolate, "onsegmentreturn")).ToLocal(&on_return) &&
      on_return->IsFunction()) {
    segments_.SetOnReturn(on_return.As<Function>());
  }
  if (segments_.receiving()) inbound_.AcceptSegments();
  CHECK_EQ(uv_poll_init_socket(data->loop, &poll_, fd), 0);
  AttachUvHandle(reinterpret_cast<uv_handle_t*>(&poll_));
  UpdatePoll();
}

// new Channel(fd, format, maxMessageSize, connecting, callbacks[, outOfLineThreshold])
// A threshold of -1 (or none) keeps every message inline; only channels to
// procwire peers over unix sockets get one. Bad arguments throw a coded
// error (never a CHECK): the constructor is reachable from user code.
void NativeChannel::New(const FunctionCallbackInfo<Value>& args) {
  AddonData* data = AddonData::From(args);
  Local<Context> context = args.GetIsolate()->GetCurrentContext();
  auto bad = [&](const char* why) { ThrowCodedError(data, context, "ERR_PROCWIRE_INVALID_ARG", why); };
  if (!args.IsConstructCall()) return bad("NativeChannel must be called with new");
  if (!(args[0]->IsInt32() && args[1]->IsInt32() && args[2]->IsNumber() && args[3]->IsBoolean() &&
        args[4]->IsObject())) {
    return bad("NativeChannel(fd, format, maxMessageSize, connecting, callbacks): bad argument types");
  }
  if (!(args[5]->IsUndefined() || args[5]->IsNumber()) ||
      !(args[6]->IsUndefined() || args[6]->IsFloat64Array())) {
    return bad("NativeChannel: bad outOfLineThreshold or counters");
  }
  const double ool_threshold = args[5]->IsNumber() ? args[5].As<Number>()->Value() : -1;
  const int fd = args[0].As<Integer>()->Value();
  const WireFormat format = args[1].As<Integer>()->Value() == 1 ? WireFormat::kJson : WireFormat::kAdvanced;
  const double max = args[2].As<Number>()->Value();
  if (!(max >= 0)) return bad("NativeChannel: maxMessageSize must be a non-negative number");
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    return bad("NativeChannel: fd must be an open socket descriptor");
  }
  if (args[6]->IsFloat64Array() && args[6].As<v8::Float64Array>()->Length() < 2) {
    return bad("NativeChannel: the counters array needs 2 elements");
  }
  for (const char* name : {"onread", "onwrite", "onend", "onconnect"}) {
    Local<Value> fn;
    if (!args[4].As<Object>()->Get(context, OneByteString(args.GetIsolate(), name)).ToLocal(&fn)) return;
    if (!fn->IsFunction()) return bad("NativeChannel: callbacks need onread, onwrite, onend and onconnect");
  }
  NativeChannel* self = new NativeChannel(data, context, args.This(), fd, format, static_cast<size_t>(max),
                                          args[3]->IsTrue(), args[4].As<Object>(), ool_threshold);
  if (args[6]->IsFloat64Array()) self->segments_.SetSharedCounters(args[6].As<v8::Float64Array>());
}

// setMaxMessageSize(n): the largest payload accepted from now on, applied
// at once to a partially buffered frame too (its declared length over n
// closes the channel with a framing error on the next read). The hello
// runs under a small limit, so an unauthenticated peer cannot make us
// buffer or decode more than a hello's worth. A limit below the channel's
// own is provisional: a read stops at a frame over it rather than failing,
// and judges that frame again once the batch before it was delivered (the
// hello that completed in that batch raised the limit; see ReadAll), so
// what the peer sent right after its hello arrives intact.
void NativeChannel::SetMaxMessageSize(const FunctionCallbackInfo<Value>& args) {
  NativeChannel* self = Unwrap(args);
  if (self == nullptr) return;
  Local<Context> context = args.GetIsolate()->GetCurrentContext();
  if (!args[0]->IsNumber() || !(args[0].As<Number>()->Value() >= 0)) {
    ThrowCodedError(self->data_, context, "ERR_PROCWIRE_INVALID_ARG",
                    "maxMessageSize must be a non-negative number");
    return;
  }
  const double max = args[0].As<Number>()->Value();
  const size_t limit = max >= 18446744073709551615.0 ? SIZE_MAX : static_cast<size_t>(max);
  self->rings_.SetMaxPayloadSize(limit);
  const FramingError e = self->framer_.SetMaxPayloadSize(limit, limit < self->configured_max_message_size_);
  // false: a frame already buffered is over the new limit and the stream
  // can no longer be framed; the caller closes the channel (a later read
  // would report the same framing error).
  args.GetReturnValue().Set(e == FramingError::kNone);
}

void NativeChannel::ReadStart(const FunctionCallbackInfo<Value>& args) {
  NativeChannel* self = Unwrap(args);
  CHECK_NOT_NULL(self);
  self->reader_.Resume(self->ended());
  self->UpdatePoll();
  // Ring records that arrived while paused were not read: look again.
  if (self->reader_.reading()) self->rings_.LookAgain();
}

void NativeChannel::ReadStop(const FunctionCallbackInfo<Value>& args) {
  NativeChannel* self = Unwrap(args);
  CHECK_NOT_NULL(self);
  self->reader_.Pause();
  self->UpdatePoll();
}

// stats() -> one array of doubles in the layout of src/core/channel_stats.h
// (exported as binding.statsLayout).
void NativeChannel::Stats(const FunctionCallbackInfo<Value>& args) {
  static_assert(stats::kHistogramBuckets == kHistogramBuckets, "one histogram size");
  NativeChannel* self = Unwrap(args);
  CHECK_NOT_NULL(self);
  Isolate* isolate = args.GetIsolate();
  Local<Context> context = isolate->GetCurrentContext();
  const Counters& c = self->counters_;
  double v[stats::kCount] = {};
  v[stats::kMessagesIn] = c.messages_in;
  v[stats::kMessagesOut] = c.messages_out;
  v[stats::kBytesIn] = c.bytes_in;
  v[stats::kBytesOut] = self->writer_.TotalWritten();
  v[stats::kQueuedBytes] = static_cast<double>(self->writer_.queued_bytes());
  v[stats::kWriteCalls] = self->writer_.write_calls();
  v[stats::kReadCalls] = c.read_calls;
  v[stats::kDecodeErrors] = c.decode_errors;
  v[stats::kBufferedBytes] = static_cast<double>(self->framer_.buffered());
  for (int i = 0; i < stats::kHistogramBuckets; i++) {
    v[stats::kHistogramIn + i] = c.histogram_in[i];
    v[stats::kHistogramOut + i] = c.histogram_out[i];
  }
  v[stats::kOutOfLineMessagesOut] = c.ool_messages_out;
  v[stats::kOutOfLineBytesOut] = c.ool_bytes_out;
  v[stats::kOutOfLineMessagesIn] = c.ool_messages_in;
  v[stats::kOutOfLineBytesIn] = c.ool_bytes_in;
  v[stats::kRingsEnabled] = self->rings_.enabled() ? 1.0 : 0.0;
  v[stats::kRingMessagesOut] = self->rings_.messages_out();
  v[stats::kRingMessagesIn] = self->rings_.messages_in();
  Local<Array> out = Array::New(isolate, stats::kCount);
  for (int i = 0; i < stats::kCount; i++) out->Set(context, i, Number::New(isolate, v[i])).Check();
  args.GetReturnValue().Set(out);
}

void NativeChannel::Fd(const FunctionCallbackInfo<Value>& args) {
  NativeChannel* self = Unwrap(args);
  CHECK_NOT_NULL(self);
  args.GetReturnValue().Set(self->fd_);
}

void NativeChannel::ReleaseV8Handles() {
  reader_.ReleaseV8Handles();
  batch_.ReleaseV8Handles();
  writer_.ReleaseV8Handles();
  segments_.ReleaseV8Handles();
  on_write_.Reset();
  on_end_.Reset();
  on_connect_.Reset();
}

Local<Function> NativeChannel::GetFunction(Local<Context> context, Local<Object> from, const char* name) {
  Local<Value> v = from->Get(context, OneByteString(Isolate::GetCurrent(), name)).ToLocalChecked();
  CHECK(v->IsFunction());
  return v.As<Function>();
}

void NativeChannel::UpdatePoll() {
  if (closing_) return;
  int events = 0;
  if (connecting()) {
    events = UV_WRITABLE;
  } else {
    if (reader_.reading()) events |= UV_READABLE | UV_DISCONNECT;
    // Paused by the user (not ended): the poll stays active watching for
    // the peer's hang-up only, so a paused channel keeps the process
    // alive exactly as a reading one does (the ref policy decides).
    if (!reader_.reading() && !ended() && !reader_.peer_hung_up()) events |= UV_DISCONNECT;
    if (writer_.want_write()) events |= UV_WRITABLE;
  }
  if (events == poll_events_) return;
  poll_events_ = events;
  if (events == 0) {
    uv_poll_stop(&poll_);
  } else {
    CHECK_EQ(uv_poll_start(&poll_, events, OnPoll), 0);
  }
}

// One wake-up of the socket's poll handle, in the order docs/internals.md
// gives ("Order of events"); each step is a collaborator's.
void NativeChannel::OnPoll(uv_poll_t* handle, int status, int events) {
  NativeChannel* self = FromUvHandle<NativeChannel>(handle->data);
  if (self->closing_) return;
  HandleScope scope(self->data_->isolate);
  Local<Context> context = self->context_.Get(self->data_->isolate);
  Context::Scope context_scope(context);
  if (status < 0) {
    // libuv turns POLLERR into UV_EBADF and stops the watcher.
    self->poll_events_ = 0;
    if (self->connecting()) {
      self->FailConnect(SocketError(self->fd_));
    } else {
      self->reader_.OnPollError(context);
    }
    return;
  }
  if (self->connecting()) {
    if (events & (UV_WRITABLE | UV_DISCONNECT)) self->FinishConnect();
    return;
  }
  if ((events & UV_WRITABLE) && !self->writer_.OnWritable(context)) return;
  if ((events & (UV_READABLE | UV_DISCONNECT)) && self->reader_.reading()) {
    self->reader_.OnReadable(context);
  } else if ((events & UV_DISCONNECT) && !self->reader_.reading()) {
    self->reader_.OnHangUpWhilePaused();
  }
}

// A connect that failed: SO_ERROR (so_error, negative errno) says why.
void NativeChannel::FailConnect(int so_error) {
  phase_ = Phase::kOpen;
  End(EndReason::kSystemError, Local<Value>(), so_error != 0 ? -so_error : ECONNREFUSED);
}

void NativeChannel::FinishConnect() {
  const int err = SocketError(fd_);
  phase_ = Phase::kOpen;
  if (err != 0) {
    End(EndReason::kSystemError, Local<Value>(), -err);
    return;
  }
  UpdatePoll();
  Isolate* isolate = data_->isolate;
  Local<Value> argv[] = {v8::Undefined(isolate)};
  Call(on_connect_, 0, argv);
  if (closing_) return;
  // Sends made while connecting go out now.
  const int werr = writer_.DoFlush();
  if (werr != 0) End(EndReason::kSystemError, Local<Value>(), werr);
}

// The stream ended, once: onend(reason name, coded error or undefined,
// errno name or undefined). sys_error: the errno of kSystemError.
void NativeChannel::End(EndReason reason, Local<Value> err, int sys_error) {
  if (ended()) return;
  phase_ = Phase::kEnded;
  reader_.Pause();
  writer_.StopWriting();
  UpdatePoll();
  Isolate* isolate = data_->isolate;
  Local<Value> argv[] = {
      OneByteString(isolate, EndReasonName(reason)),
      err.IsEmpty() ? Local<Value>(v8::Undefined(isolate)) : err,
      sys_error != 0 ? Local<Value>(ErrnoName(isolate, sys_error)) : Local<Value>(v8::Undefined(isolate))};
  Call(on_end_, 3, argv);
}

// The socket's poll handle and, with rings, the wake-up link's: the object
// goes when the last has closed.
void NativeChannel::CloseUvHandles() {
  segments_.Close();
  data_->open_channels--;
  uv_poll_stop(&poll_);
  uv_close(reinterpret_cast<uv_handle_t*>(&poll_), OnUvHandleClosed);
  spin_.Close(OnUvHandleClosed);
  rings_.Close(OnUvHandleClosed);
}

void InitNativeChannel(AddonData* data, Local<Context> context, Local<Object> exports) {
  Isolate* isolate = data->isolate;
  Local<v8::External> external = v8::External::New(isolate, data);

  Local<FunctionTemplate> ch = FunctionTemplate::New(isolate, NativeChannel::New, external);
  ch->SetClassName(OneByteString(isolate, "NativeChannel"));
  ch->InstanceTemplate()->SetInternalFieldCount(1);
  ChannelWriter::AddMethods(isolate, ch, external);
  SegmentSide::AddMethods(isolate, ch, external);
  SetMethod(isolate, ch, external, "setMaxMessageSize", NativeChannel::SetMaxMessageSize);
  ChannelReader::AddMethods(isolate, ch, external);
  MessageBatch::AddMethods(isolate, ch, external);
  RingSide::AddMethods(isolate, ch, external);
  SetMethod(isolate, ch, external, "readStart", NativeChannel::ReadStart);
  SetMethod(isolate, ch, external, "readStop", NativeChannel::ReadStop);
  SetMethod(isolate, ch, external, "ref", HandleWrap::Ref);
  SetMethod(isolate, ch, external, "unref", HandleWrap::Unref);
  SetMethod(isolate, ch, external, "close", HandleWrap::Close);
  SetMethod(isolate, ch, external, "stats", NativeChannel::Stats);
  SetMethod(isolate, ch, external, "fd", NativeChannel::Fd);
  exports->Set(context, OneByteString(isolate, "NativeChannel"), ch->GetFunction(context).ToLocalChecked())
      .Check();

  // statsLayout: { name: index, ..., histogramBuckets, length } for stats().
  Local<Object> layout = Object::New(isolate);
  for (const stats::Field& f : stats::kFields) {
    layout->Set(context, OneByteString(isolate, f.name), v8::Integer::New(isolate, f.index)).Check();
  }
  layout
      ->Set(context, OneByteString(isolate, "histogramBuckets"),
            v8::Integer::New(isolate, stats::kHistogramBuckets))
      .Check();
  layout->Set(context, OneByteString(isolate, "length"), v8::Integer::New(isolate, stats::kCount)).Check();
  exports->Set(context, OneByteString(isolate, "statsLayout"), layout).Check();

  // endReasons: the names onend's first argument takes, in the enum's order
  // (src/core/end_reason.h), so lib/ can check its table against them.
  Local<Array> reasons = Array::New(isolate, static_cast<int>(kEndReasonCount));
  for (size_t i = 0; i < kEndReasonCount; i++) {
    reasons->Set(context, static_cast<uint32_t>(i), OneByteString(isolate, kEndReasonNames[i])).Check();
  }
  exports->Set(context, OneByteString(isolate, "endReasons"), reasons).Check();
}

}  // namespace procwire
