// NativeChannel: New(), argument checks, the method table, OnPoll and the
// channel's end (see native_channel_impl.h for the other files).
#include "native_channel_impl.h"

#include <sys/ioctl.h>

namespace procwire {

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
  if (args[6]->IsFloat64Array()) {
    // Counters JavaScript reads without a call: [segment bytes sent,
    // segments sent]. The array stays alive with the channel.
    Local<v8::Float64Array> shared = args[6].As<v8::Float64Array>();
    self->shared_counters_.Reset(args.GetIsolate(), shared);
    self->shared_ =
        reinterpret_cast<double*>(static_cast<uint8_t*>(shared->Buffer()->Data()) + shared->ByteOffset());
  }
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
  self->ring_frames_.SetMaxPayloadSize(limit);
  const FramingError e = self->reader_.SetMaxPayloadSize(limit, limit < self->configured_max_message_size_);
  // false: a frame already buffered is over the new limit and the stream
  // can no longer be framed; the caller closes the channel (a later read
  // would report the same framing error).
  args.GetReturnValue().Set(e == FramingError::kNone);
}

void NativeChannel::ReadStart(const FunctionCallbackInfo<Value>& args) {
  NativeChannel* self = Unwrap(args);
  CHECK_NOT_NULL(self);
  self->reading_ = !self->ended();
  self->UpdatePoll();
  // Ring records that arrived while paused were not read: look again.
  if (self->reading_ && self->rings_ != nullptr && self->rings_->has_inbound()) {
    self->rings_->WakeSelf();
  }
}

void NativeChannel::ReadStop(const FunctionCallbackInfo<Value>& args) {
  NativeChannel* self = Unwrap(args);
  CHECK_NOT_NULL(self);
  self->reading_ = false;
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
  v[stats::kBytesOut] = self->TotalWritten();
  v[stats::kQueuedBytes] = static_cast<double>(self->queue_.queued_bytes());
  v[stats::kWriteCalls] = static_cast<double>(self->queue_.write_calls());
  v[stats::kReadCalls] = c.read_calls;
  v[stats::kDecodeErrors] = c.decode_errors;
  v[stats::kBufferedBytes] = static_cast<double>(self->reader_.buffered());
  for (int i = 0; i < stats::kHistogramBuckets; i++) {
    v[stats::kHistogramIn + i] = c.histogram_in[i];
    v[stats::kHistogramOut + i] = c.histogram_out[i];
  }
  v[stats::kOutOfLineMessagesOut] = c.ool_messages_out;
  v[stats::kOutOfLineBytesOut] = c.ool_bytes_out;
  v[stats::kOutOfLineMessagesIn] = c.ool_messages_in;
  v[stats::kOutOfLineBytesIn] = c.ool_bytes_in;
  const bool rings_on = self->ring_out_ready_ && self->rings_ != nullptr && self->rings_->has_inbound();
  v[stats::kRingsEnabled] = rings_on ? 1.0 : 0.0;
  v[stats::kRingMessagesOut] = self->rings_ != nullptr ? self->rings_->messages_out : 0.0;
  v[stats::kRingMessagesIn] = self->rings_ != nullptr ? self->rings_->messages_in : 0.0;
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
  if (block_ != nullptr) block_->ReleaseArrayBuffer();
  on_read_.Reset();
  on_write_.Reset();
  on_end_.Reset();
  on_connect_.Reset();
  on_segment_return_.Reset();
  shared_counters_.Reset();
  shared_ = nullptr;
  js_decode_ = false;
  js_bytes_ref_.Reset();
  js_frames_ref_.Reset();
  js_bytes_ = nullptr;
  js_frames_ = nullptr;
  stage_ref_.Reset();
  stage_ = nullptr;
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
    if (reading_) events |= UV_READABLE | UV_DISCONNECT;
    // Paused by the user (not ended): the poll stays active watching for
    // the peer's hang-up only, so a paused channel keeps the process
    // alive exactly as a reading one does (the ref policy decides).
    if (!reading_ && !ended() && !peer_hung_up_) events |= UV_DISCONNECT;
    if (want_write_) events |= UV_WRITABLE;
  }
  if (events == poll_events_) return;
  poll_events_ = events;
  if (events == 0) {
    uv_poll_stop(&poll_);
  } else {
    CHECK_EQ(uv_poll_start(&poll_, events, OnPoll), 0);
  }
}

void NativeChannel::OnPoll(uv_poll_t* handle, int status, int events) {
  NativeChannel* self = FromUvHandle<NativeChannel>(handle->data);
  if (self->closing_) return;
  Isolate* isolate = self->data_->isolate;
  HandleScope scope(isolate);
  Local<Context> context = self->context_.Get(isolate);
  Context::Scope context_scope(context);
  if (status < 0) {
    // libuv turns POLLERR into UV_EBADF and stops the watcher. The socket
    // may still hold data the peer sent before it failed: read that first,
    // then report the socket's real error (ECONNRESET, EPIPE, ...).
    self->poll_events_ = 0;
    const int so_error = SocketError(self->fd_);
    // Paused with data left: it is read on resume, before the end, which
    // reports this error then (see deferred_error_); ending now would drop
    // what the peer sent before it failed.
    if (!self->reading_ && !self->connecting() && !self->ended() && !self->NothingLeftToRead()) {
      if (so_error != 0) self->deferred_error_ = -so_error;
      self->peer_hung_up_ = true;
      return;
    }
    if (self->reading_ && !self->connecting()) self->OnReadable(context);
    if (self->closing_) return;
    if (self->connecting()) {
      // SO_ERROR was consumed above; a failed connect reports it here.
      self->phase_ = Phase::kOpen;
      self->End(EndReason::kSystemError, Local<Value>(), so_error != 0 ? -so_error : ECONNREFUSED);
      return;
    }
    if ((so_error == 0 || so_error == -ECONNRESET) && self->reader_.buffered() > 0) {
      self->EndTruncated(context);
      return;
    }
    if (so_error == 0) {
      self->End(EndReason::kEndOfStream, Local<Value>());
    } else {
      self->End(EndReason::kSystemError, Local<Value>(), -so_error);
    }
    return;
  }
  if (self->connecting()) {
    if (events & (UV_WRITABLE | UV_DISCONNECT)) self->FinishConnect();
    return;
  }
  if (events & UV_WRITABLE) {
    const int err = self->DoFlush();
    if (self->closing_) return;
    if (err != 0) {
      // A peer that wrote and then hung up: what it wrote is still in
      // our socket, ahead of its end, and Node's channel reads it all
      // before it disconnects. So a reading channel leaves the close to
      // the read side, which delivers those messages and then sees the
      // end (as Channel._peerGoneWhileReading does for flushes that
      // JavaScript starts); the failed write stops watching for
      // writability (DoFlush), so this does not spin.
      if ((err == EPIPE || err == ECONNRESET) && self->reading_) {
        self->OnReadable(context);
        return;
      }
      self->End(EndReason::kSystemError, Local<Value>(), err);
      return;
    }
    Local<Value> argv[] = {Number::New(isolate, self->TotalWritten())};
    self->Call(self->on_write_, 1, argv);
    if (self->closing_) return;
  }
  if ((events & (UV_READABLE | UV_DISCONNECT)) && self->reading_) {
    self->OnReadable(context);
  } else if ((events & UV_DISCONNECT) && !self->reading_) {
    // The peer hung up while we are paused. With nothing left to read (no
    // byte in the socket, no partial frame, no ring record), the channel
    // ends now, as a reading one would: resume() would have nothing to
    // deliver, and a paused channel with a dead peer would otherwise stay
    // open, unnoticed, for ever. Otherwise the data before the hang-up is
    // read (and the end seen) on resume; until then stop watching, as the
    // condition is level-triggered and would wake us in a loop.
    if (self->NothingLeftToRead()) {
      self->End(EndReason::kEndOfStream, Local<Value>());
      return;
    }
    self->peer_hung_up_ = true;
    self->UpdatePoll();
  }
}

// True when the peer left nothing for this end to read: no byte in the
// socket's receive queue, no partial frame, no ring record.
bool NativeChannel::NothingLeftToRead() {
  int unread = 0;
  if (ioctl(fd_, FIONREAD, &unread) != 0 || unread != 0) return false;
  if (reader_.buffered() != 0) return false;
  return rings_ == nullptr || !rings_->InboundMaybeReady();
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
  const int werr = DoFlush();
  if (werr != 0) End(EndReason::kSystemError, Local<Value>(), werr);
}

// The stream ended, once: onend(reason name, coded error or undefined,
// errno name or undefined). sys_error: the errno of kSystemError.
void NativeChannel::End(EndReason reason, Local<Value> err, int sys_error) {
  if (ended()) return;
  phase_ = Phase::kEnded;
  reading_ = false;
  want_write_ = false;
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
  // No more returns: the pool's async handle closes, and the mappings
  // stay only as long as received Buffers use them.
  if (received_pool_ != nullptr) received_pool_->Close();
  data_->open_channels--;
  uv_poll_stop(&poll_);
  uv_close(reinterpret_cast<uv_handle_t*>(&poll_), OnUvHandleClosed);
  if (socket_spin_inited_) {
    uv_idle_stop(&socket_spin_);
    uv_close(reinterpret_cast<uv_handle_t*>(&socket_spin_), OnUvHandleClosed);
  }
  if (ring_poll_started_) {
    uv_poll_stop(&ring_poll_);
    uv_close(reinterpret_cast<uv_handle_t*>(&ring_poll_), OnUvHandleClosed);
    auto& readers = data_->ring_readers;
    readers.erase(std::remove(readers.begin(), readers.end(), this), readers.end());
  }
}

void InitNativeChannel(AddonData* data, Local<Context> context, Local<Object> exports) {
  Isolate* isolate = data->isolate;
  Local<v8::External> external = v8::External::New(isolate, data);

  Local<FunctionTemplate> ch = FunctionTemplate::New(isolate, NativeChannel::New, external);
  ch->SetClassName(OneByteString(isolate, "NativeChannel"));
  ch->InstanceTemplate()->SetInternalFieldCount(1);
  NativeChannel::AddWriterMethods(isolate, ch, external);
  NativeChannel::AddSegmentMethods(isolate, ch, external);
  SetMethod(isolate, ch, external, "setMaxMessageSize", NativeChannel::SetMaxMessageSize);
  NativeChannel::AddReaderMethods(isolate, ch, external);
  NativeChannel::AddRingMethods(isolate, ch, external);
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
