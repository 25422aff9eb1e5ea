// The advanced format (Node's child_process `advanced` serialization) on V8's
// ValueSerializer and ValueDeserializer: the delegates that write and read
// ArrayBufferViews and other host objects as Node does, place large views in
// out-of-line segments and read them back, and the view type helpers they
// call for every view (kept here so those calls stay inside this file).
// Ownership: the delegates live on the stack of one EncodeAdvanced or
// DecodeAdvanced call; segment descriptors they make go into the caller's
// OutOfLine. Threading: the isolate's thread only (see codec_impl.h).
#include <node_buffer.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "../core/shm.h"
#include "codec_impl.h"
#include "segments.h"

namespace procwire {

using v8::Array;
using v8::ArrayBuffer;
using v8::ArrayBufferView;
using v8::BackingStore;
using v8::Context;
using v8::Isolate;
using v8::Just;
using v8::Local;
using v8::Maybe;
using v8::MaybeLocal;
using v8::Name;
using v8::Nothing;
using v8::Object;
using v8::String;
using v8::Value;

namespace {

// Node's host-object tags and procwire's segment view tag are defined once,
// in src/core/protocol.h (protocol::kHostTag*).
// Node's view type indexes (lib/v8.js); 10 is Node's Buffer.
constexpr uint32_t kBufferIndex = 10;
constexpr uint32_t kFloat16Index = 13;
constexpr uint32_t kNoIndex = 0xffffffff;

#if V8_MAJOR_VERSION >= 13
#define PROCWIRE_HAS_FLOAT16 1
#else
#define PROCWIRE_HAS_FLOAT16 0
#endif

uint32_t ViewTypeIndex(Local<Value> v) {
  if (v->IsUint8Array()) return 1;
  if (v->IsInt8Array()) return 0;
  if (v->IsUint8ClampedArray()) return 2;
  if (v->IsInt16Array()) return 3;
  if (v->IsUint16Array()) return 4;
  if (v->IsInt32Array()) return 5;
  if (v->IsUint32Array()) return 6;
  if (v->IsFloat32Array()) return 7;
  if (v->IsFloat64Array()) return 8;
  if (v->IsDataView()) return 9;
  if (v->IsBigInt64Array()) return 11;
  if (v->IsBigUint64Array()) return 12;
#if PROCWIRE_HAS_FLOAT16
  if (v->IsFloat16Array()) return kFloat16Index;
#endif
  return kNoIndex;
}

size_t BytesPerElement(uint32_t index) {
  switch (index) {
    case 3:
    case 4:
    case kFloat16Index:
      return 2;
    case 5:
    case 6:
    case 7:
      return 4;
    case 8:
    case 11:
    case 12:
      return 8;
    default:
      return 1;
  }
}

MaybeLocal<Object> MakeView(Isolate* isolate, uint32_t index, Local<ArrayBuffer> ab, size_t offset,
                            size_t byte_length) {
  const size_t length = byte_length / BytesPerElement(index);
  switch (index) {
    case 0:
      return v8::Int8Array::New(ab, offset, length);
    case 1:
      return v8::Uint8Array::New(ab, offset, length);
    case 2:
      return v8::Uint8ClampedArray::New(ab, offset, length);
    case 3:
      return v8::Int16Array::New(ab, offset, length);
    case 4:
      return v8::Uint16Array::New(ab, offset, length);
    case 5:
      return v8::Int32Array::New(ab, offset, length);
    case 6:
      return v8::Uint32Array::New(ab, offset, length);
    case 7:
      return v8::Float32Array::New(ab, offset, length);
    case 8:
      return v8::Float64Array::New(ab, offset, length);
    case 9:
      return v8::DataView::New(ab, offset, byte_length);
    case kBufferIndex: {
      Local<Object> buf;
      if (!node::Buffer::New(isolate, ab, offset, byte_length).ToLocal(&buf)) return {};
      return buf;
    }
    case 11:
      return v8::BigInt64Array::New(ab, offset, length);
    case 12:
      return v8::BigUint64Array::New(ab, offset, length);
#if PROCWIRE_HAS_FLOAT16
    case kFloat16Index:
      return v8::Float16Array::New(ab, offset, length);
#endif
    default:
      return {};
  }
}

bool IsKnownViewIndex(uint32_t index) {
  if (index <= 12) return true;
  return PROCWIRE_HAS_FLOAT16 && index == kFloat16Index;
}

class SerializerDelegate final : public v8::ValueSerializer::Delegate {
 public:
  SerializerDelegate(AddonData* data, Local<Context> context, OutOfLine* ool)
      : data_(data), context_(context), ool_(ool) {}
  void set_serializer(v8::ValueSerializer* s) { serializer_ = s; }

  void ThrowDataCloneError(Local<String> message) override {
    // V8 reports a buffer it could not grow as a clone error too; the value
    // itself was fine, so the caller gets the out-of-memory code, as for the
    // queued copy of a frame that could not be allocated.
    if (out_of_memory_) {
      ThrowCodedError(data_, context_, "ERR_PROCWIRE_OUT_OF_MEMORY",
                      "out of memory encoding the message; nothing was sent");
      return;
    }
    String::Utf8Value text(data_->isolate, message);
    ThrowCodedError(data_, context_, "ERR_PROCWIRE_UNSERIALIZABLE",
                    *text ? *text : "value could not be serialized");
  }

  Maybe<bool> WriteHostObject(Isolate* isolate, Local<Object> object) override {
    if (object->IsArrayBufferView()) return WriteView(isolate, object);
    // Any other host object (an object with embedder fields, such as a
    // MessagePort): a shallow copy made like {...object}. Properties are
    // defined on the copy, so no setter on Object.prototype runs, and keys
    // are strings, as object spread makes them.
    serializer_->WriteUint32(protocol::kHostTagOther);
    Local<Array> keys;
    if (!object
             ->GetOwnPropertyNames(context_,
                                   static_cast<v8::PropertyFilter>(v8::ONLY_ENUMERABLE | v8::SKIP_SYMBOLS),
                                   v8::KeyConversionMode::kConvertToString)
             .ToLocal(&keys)) {
      return Nothing<bool>();
    }
    Local<Object> copy = Object::New(isolate);
    for (uint32_t i = 0; i < keys->Length(); i++) {
      Local<Value> key;
      Local<Value> value;
      if (!keys->Get(context_, i).ToLocal(&key) || !object->Get(context_, key).ToLocal(&value) ||
          copy->CreateDataProperty(context_, key.As<Name>(), value).IsNothing()) {
        return Nothing<bool>();
      }
    }
    return serializer_->WriteValue(context_, copy);
  }

  // Node's IPC cannot share memory with another process; refuse with a code
  // (V8's default would throw an uncoded error).
  Maybe<uint32_t> GetSharedArrayBufferId(Isolate* isolate,
                                         Local<v8::SharedArrayBuffer> shared_array_buffer) override {
    ThrowCodedError(data_, context_, "ERR_PROCWIRE_UNSERIALIZABLE",
                    "a SharedArrayBuffer cannot be sent to another process");
    return Nothing<uint32_t>();
  }

  void* ReallocateBufferMemory(void* old_buffer, size_t size, size_t* actual_size) override {
    void* p = std::realloc(old_buffer, size);
    *actual_size = p ? size : 0;
    if (p == nullptr && size > 0) out_of_memory_ = true;
    return p;
  }
  void FreeBufferMemory(void* buffer) override { std::free(buffer); }

 private:
  Maybe<bool> WriteView(Isolate* isolate, Local<Object> view) {
    // Whether it is a Buffer follows an ordinary read of `constructor`
    // compared with the real Buffer, exactly as Node decides.
    Local<Value> ctor;
    if (!view->Get(context_, OneByteString(isolate, "constructor")).ToLocal(&ctor)) {
      return Nothing<bool>();
    }
    uint32_t index;
    if (ctor->StrictEquals(data_->buffer_constructor.Get(isolate))) {
      index = kBufferIndex;
    } else {
      index = ViewTypeIndex(view);
      if (index == kNoIndex) {
        ThrowCodedError(data_, context_, "ERR_PROCWIRE_UNSERIALIZABLE",
                        "this kind of ArrayBufferView cannot be serialized");
        return Nothing<bool>();
      }
    }
    Local<ArrayBufferView> v = view.As<ArrayBufferView>();
    const size_t length = v->ByteLength();
    if (ool_ != nullptr) {
      int segment = -1;
      size_t offset = 0;
      if (!PlaceOutOfLine(v, length, &segment, &offset)) return Nothing<bool>();
      if (segment >= 0) {
        serializer_->WriteUint32(protocol::kHostTagSegmentView);
        serializer_->WriteUint32(static_cast<uint32_t>(segment));
        serializer_->WriteUint32(index);
        serializer_->WriteUint32(static_cast<uint32_t>(offset));
        serializer_->WriteUint32(static_cast<uint32_t>(length));
        return Just(true);
      }
    }
    serializer_->WriteUint32(protocol::kHostTagView);
    serializer_->WriteUint32(index);
    serializer_->WriteUint32(static_cast<uint32_t>(length));
    if (length == 0) return Just(true);
    // Only the view's own bytes: a view of a pooled Buffer must not leak the
    // pool. CopyContents would copy twice; read the backing memory directly.
    Local<ArrayBuffer> ab = v->Buffer();
    const uint8_t* bytes = static_cast<const uint8_t*>(ab->Data()) + v->ByteOffset();
    serializer_->WriteRawBytes(bytes, length);
    return Just(true);
  }

  // Decides whether a view travels out of line; if so sets *segment (and
  // the view's offset in it), making the segment when needed. Returns false
  // with an exception pending only on a hard failure.
  bool PlaceOutOfLine(Local<ArrayBufferView> v, size_t length, int* segment, size_t* offset) {
    Local<ArrayBuffer> ab = v->Buffer();
    // A view of a buffer already in a segment of this frame (transferred, or
    // shared with an earlier large view) points into it.
    for (size_t i = 0; i < ool_->sources.size(); i++) {
      if (!ool_->sources[i].IsEmpty() && ool_->sources[i] == ab) {
        *segment = static_cast<int>(i);
        *offset = v->ByteOffset();
        return true;
      }
    }
    if (!ool_->enabled || length < ool_->threshold || length > 0xffffffffu ||
        ool_->refs.size() >= kMaxSegmentsPerFrame) {
      return true;
    }
    // Copy the whole buffer when the view covers most of it, so other views
    // of it in this message share the segment (and one ArrayBuffer on
    // arrival); otherwise only the view's bytes.
    const uint8_t* base = static_cast<const uint8_t*>(ab->Data());
    const bool whole = ab->ByteLength() <= 2 * length && ab->ByteLength() <= 0xffffffffu;
    const uint8_t* from = whole ? base : base + v->ByteOffset();
    const size_t size = whole ? ab->ByteLength() : length;
    if (!PlaceInPool(from, size)) {
      const int fd = CreateSealedCopy(from, size);
      if (fd < 0) return true;  // no memfd to be had: send inline
      ool_->fds.push_back(fd);
      ool_->refs.push_back(SegmentRef{protocol::kSegmentSealed, 0, 0});
    }
    ool_->sources.emplace_back();
    if (whole) ool_->sources.back().Reset(data_->isolate, ab);
    ool_->segment_bytes += size;
    *segment = static_cast<int>(ool_->refs.size() - 1);
    *offset = whole ? v->ByteOffset() : 0;
    return true;
  }

  // Copies bytes into a recycled segment of the channel's pool (one warm
  // memcpy, no page faults), or into a new one by write(2). False when there
  // is no pool or it has no room: the caller makes a sealed copy instead.
  bool PlaceInPool(const uint8_t* from, size_t size) {
    if (ool_->pool == nullptr) return false;
    PooledSegment seg;
    if (ool_->pool->AcquireCopy(from, size, &seg) < 0) return false;
    // A new segment's descriptor is ours now: the queue sends it and closes
    // it (the pool keeps only its mapping).
    if (seg.fresh) ool_->fds.push_back(seg.fd);
    ool_->refs.push_back(SegmentRef{seg.fresh ? protocol::kSegmentPooledNew : protocol::kSegmentPooled,
                                    seg.id, static_cast<uint32_t>(size)});
    ool_->any_pooled = true;
    return true;
  }

  AddonData* data_;
  Local<Context> context_;
  OutOfLine* ool_;
  v8::ValueSerializer* serializer_ = nullptr;
  // Set when the serializer's buffer could not grow (see ThrowDataCloneError).
  bool out_of_memory_ = false;
};

class DeserializerDelegate final : public v8::ValueDeserializer::Delegate {
 public:
  DeserializerDelegate(AddonData* data, Local<Context> context, PayloadMemory* memory, InSegments* segments)
      : data_(data), context_(context), memory_(memory), segments_(segments) {}
  void set_deserializer(v8::ValueDeserializer* d) { deserializer_ = d; }

  MaybeLocal<Object> ReadHostObject(Isolate* isolate) override {
    uint32_t tag;
    if (!deserializer_->ReadUint32(&tag)) return Fail("ERR_PROCWIRE_DECODE", "truncated host object");
    if (tag == protocol::kHostTagOther) {
      Local<Value> value;
      if (!deserializer_->ReadValue(context_).ToLocal(&value)) return {};
      if (!value->IsObject()) {
        return Fail("ERR_PROCWIRE_DECODE", "host object copy is not an object");
      }
      return value.As<Object>();
    }
    if (tag == protocol::kHostTagSegmentView && segments_ != nullptr) return ReadSegmentView(isolate);
    if (tag != protocol::kHostTagView) return Fail("ERR_PROCWIRE_BAD_HOST_TAG", "unknown host object tag");
    uint32_t index;
    uint32_t byte_length;
    if (!deserializer_->ReadUint32(&index) || !deserializer_->ReadUint32(&byte_length)) {
      return Fail("ERR_PROCWIRE_DECODE", "truncated ArrayBufferView");
    }
    if (!CheckView(index, byte_length)) return {};
    const size_t element = BytesPerElement(index);
    const void* bytes = nullptr;
    if (!deserializer_->ReadRawBytes(byte_length, &bytes)) {
      return Fail("ERR_PROCWIRE_DECODE", "ArrayBufferView bytes run past the end of the payload");
    }
    // Aligned views borrow the input memory, as Node's do; others copy.
    if (memory_ != nullptr && byte_length > 0 && byte_length >= memory_->min_borrow()) {
      const size_t offset = static_cast<const uint8_t*>(bytes) - memory_->base();
      if (offset % element == 0) {
        Local<ArrayBuffer> ab;
        if (memory_->GetArrayBuffer(isolate).ToLocal(&ab)) {
          return MakeView(isolate, index, ab, offset, byte_length);
        }
      }
    }
    std::unique_ptr<BackingStore> store = ArrayBuffer::NewBackingStore(isolate, byte_length);
    if (byte_length > 0) std::memcpy(store->Data(), bytes, byte_length);
    Local<ArrayBuffer> copy = ArrayBuffer::New(isolate, std::move(store));
    return MakeView(isolate, index, copy, 0, byte_length);
  }

 private:
  // A view's type index and length must make sense before any bytes are
  // touched: a known type, and a whole number of elements.
  bool CheckView(uint32_t index, uint32_t byte_length) {
    if (!IsKnownViewIndex(index)) {
      Fail("ERR_PROCWIRE_BAD_VIEW_TYPE", "unknown ArrayBufferView type index");
      return false;
    }
    if (byte_length % BytesPerElement(index) != 0) {
      Fail("ERR_PROCWIRE_BAD_VIEW_LENGTH",
           "ArrayBufferView byte length is not a multiple of its element size");
      return false;
    }
    return true;
  }

  // V8 allows no JavaScript to run while it deserializes, so the coded
  // error cannot be made here: remember it, throw a plain one to stop V8,
  // and let DecodePayload replace it once V8 has returned.
  MaybeLocal<Object> Fail(const char* code, const char* message) {
    failure_code_ = code;
    failure_message_ = message;
    Isolate* isolate = data_->isolate;
    isolate->ThrowException(v8::Exception::Error(OneByteString(isolate, message)));
    return {};
  }

 public:
  const char* failure_code() const { return failure_code_; }
  const char* failure_message() const { return failure_message_; }

 private:
  const char* failure_code_ = nullptr;
  const char* failure_message_ = nullptr;

  // A view whose bytes are in one of this frame's received segments.
  MaybeLocal<Object> ReadSegmentView(Isolate* isolate) {
    uint32_t segment, index, offset, byte_length;
    if (!deserializer_->ReadUint32(&segment) || !deserializer_->ReadUint32(&index) ||
        !deserializer_->ReadUint32(&offset) || !deserializer_->ReadUint32(&byte_length)) {
      return Fail("ERR_PROCWIRE_DECODE", "truncated segment reference");
    }
    if (segment >= segments_->buffers.size()) {
      return Fail("ERR_PROCWIRE_SEGMENT", "reference to a segment the frame does not carry");
    }
    if (!CheckView(index, byte_length)) return {};
    const size_t element = BytesPerElement(index);
    Local<ArrayBuffer> ab = segments_->buffers[segment];
    if (static_cast<uint64_t>(offset) + byte_length > ab->ByteLength()) {
      return Fail("ERR_PROCWIRE_SEGMENT", "segment reference runs past the end of the segment");
    }
    if (offset % element == 0) return MakeView(isolate, index, ab, offset, byte_length);
    std::unique_ptr<BackingStore> store = ArrayBuffer::NewBackingStore(isolate, byte_length);
    std::memcpy(store->Data(), static_cast<const uint8_t*>(ab->Data()) + offset, byte_length);
    return MakeView(isolate, index, ArrayBuffer::New(isolate, std::move(store)), 0, byte_length);
  }

  AddonData* data_;
  Local<Context> context_;
  PayloadMemory* memory_;
  InSegments* segments_;
  v8::ValueDeserializer* deserializer_ = nullptr;
};

}  // namespace

bool EncodeAdvanced(AddonData* data, Local<Context> context, Local<Value> value, EncodedFrame* out,
                    OutOfLine* ool) {
  Isolate* isolate = data->isolate;
  SerializerDelegate delegate(data, context, ool);
  v8::ValueSerializer serializer(isolate, &delegate);
  delegate.set_serializer(&serializer);
  serializer.SetTreatArrayBufferViewsAsHostObjects(true);
  if (ool != nullptr && !PrepareTransfers(data, context, &serializer, ool)) return false;
  // Room for the length header first, then the V8 header and value, so the
  // frame is one block that goes to the socket as it is.
  static const uint8_t kPlaceholder[kAdvancedHeaderSize] = {0, 0, 0, 0};
  serializer.WriteRawBytes(kPlaceholder, sizeof(kPlaceholder));
  serializer.WriteHeader();
  bool ok;
  if (!serializer.WriteValue(context, value).To(&ok) || !ok) return false;
  std::pair<uint8_t*, size_t> released = serializer.Release();
  const size_t payload = released.second - kAdvancedHeaderSize;
  if (payload > 0xffffffffu) {
    std::free(released.first);
    ThrowCodedError(data, context, "ERR_PROCWIRE_MESSAGE_TOO_LARGE",
                    "message is larger than the 4 GiB the length header can state");
    return false;
  }
  WriteU32BigEndian(released.first, static_cast<uint32_t>(payload));
  out->data = released.first;
  out->size = released.second;
  if (ool != nullptr && !FinishTransfers(data, context, ool)) {
    std::free(out->data);
    out->data = nullptr;
    return false;
  }
  return true;
}

bool DecodeAdvanced(AddonData* data, Local<Context> context, const uint8_t* payload, size_t size,
                    PayloadMemory* memory, Local<Value>* out, const char** failure_code,
                    const char** failure_message, InSegments* segments) {
  Isolate* isolate = data->isolate;
  DeserializerDelegate delegate(data, context, memory, segments);
  v8::ValueDeserializer deserializer(isolate, payload, size, &delegate);
  delegate.set_deserializer(&deserializer);
  if (segments != nullptr) {
    // Transferred ArrayBuffers were given ids equal to their segment index.
    for (size_t i = 0; i < segments->buffers.size(); i++) {
      deserializer.TransferArrayBuffer(static_cast<uint32_t>(i), segments->buffers[i]);
    }
  }
  bool header_ok = false;
  if (!deserializer.ReadHeader(context).To(&header_ok) || !header_ok) return false;
  if (deserializer.ReadValue(context).ToLocal(out)) return true;
  *failure_code = delegate.failure_code();
  *failure_message = delegate.failure_message();
  return false;
}

}  // namespace procwire
