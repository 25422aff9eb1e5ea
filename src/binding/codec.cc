// The codec's entry points, EncodeFrame and DecodePayload (codec.h), and
// the json format (JSON.stringify into the frame's block, JSON.parse). The
// advanced format is in codec_advanced.cc, transfers in codec_transfers.cc
// (see codec_impl.h). Ownership: an encoded frame's block belongs to the
// caller. Threading: the isolate's thread only.
#include "codec.h"

#include "../core/v8_scan.h"

#include <cstdlib>
#include <cstring>

#include "codec_impl.h"
#include "compat.h"

namespace procwire {

using v8::Context;
using v8::Isolate;
using v8::Local;
using v8::Object;
using v8::String;
using v8::TryCatch;
using v8::Value;

namespace {

// See EncodeJson: texts up to this many characters are written without
// measuring their UTF-8 size first (Node's stream writer uses the same bound).
constexpr size_t kJsonMeasureFrom = 65535;
// ... and their block is trimmed to the bytes written when at least this
// much of it went unused.
constexpr size_t kJsonTrimFrom = 4096;

bool EncodeJson(AddonData* data, Local<Context> context, Local<Value> value, EncodedFrame* out) {
  Isolate* isolate = data->isolate;
  Local<String> text;
  {
    // JSON.stringify's own TypeErrors (BigInt, cycles) become coded errors,
    // with the original as `cause`; a throwing toJSON() stays the user's.
    TryCatch try_catch(isolate);
    if (!v8::JSON::Stringify(context, value).ToLocal(&text)) {
      if (try_catch.HasTerminated() || !try_catch.HasCaught()) {
        try_catch.ReThrow();
        return false;
      }
      Local<Value> cause = try_catch.Exception();
      if (!cause->IsNativeError() ||
          !cause.As<Object>()->GetConstructorName()->StringEquals(OneByteString(isolate, "TypeError"))) {
        try_catch.ReThrow();
        return false;
      }
      try_catch.Reset();
      Local<Value> err;
      String::Utf8Value text_of_cause(isolate, cause);
      if (MakeCodedError(data, context, "ERR_PROCWIRE_UNSERIALIZABLE",
                         *text_of_cause ? *text_of_cause : "value cannot be serialized as JSON", cause)
              .ToLocal(&err)) {
        isolate->ThrowException(err);
      }
      // ThrowException inside the TryCatch scope would be swallowed.
      try_catch.ReThrow();
      return false;
    }
  }
  // The UTF-8 goes straight into the frame's block: no intermediate copy
  // (String::Utf8Value would make one, as large as the message). Up to
  // kJsonMeasureFrom characters the block is sized for the worst case (three
  // bytes per UTF-16 unit; two for a string V8 stores one byte wide) and
  // trimmed after, as Node's own stream writer does: measuring first is a
  // second pass over the text (6% of a parent's CPU per 16 KiB json message
  // in a profile). Longer texts are measured, so their block is not up to
  // three times their size.
  const size_t chars = static_cast<size_t>(text->Length());
  const bool measure = chars > kJsonMeasureFrom;
  const size_t capacity = measure ? Utf8Size(isolate, text) : chars * (text->IsOneByte() ? 2 : 3);
  uint8_t* block = static_cast<uint8_t*>(std::malloc(capacity + 1));
  if (block == nullptr) {
    isolate->LowMemoryNotification();
    ThrowCodedError(data, context, "ERR_PROCWIRE_OUT_OF_MEMORY",
                    "out of memory encoding JSON; nothing was sent");
    return false;
  }
  const size_t length = WriteUtf8(isolate, text, reinterpret_cast<char*>(block), capacity);
  CHECK(measure ? length == capacity : length <= capacity);
  block[length] = '\n';
  if (capacity - length >= kJsonTrimFrom) {
    // Shrinking keeps the block where it is (no copy); a queued frame then
    // holds only its own bytes. Small slack is left alone: a small frame's
    // block is freed once written, and trimming it would cost every small
    // message a realloc.
    uint8_t* trimmed = static_cast<uint8_t*>(std::realloc(block, length + 1));
    if (trimmed != nullptr) block = trimmed;
  }
  out->data = block;
  out->size = length + 1;
  return true;
}

// Decodes under the caller's TryCatch; any failure leaves an exception there
// or returns false with none (the caller then reports a generic one). When the
// delegate refused a host object, *failure gets its code and message.
bool DecodeUnchecked(AddonData* data, Local<Context> context, WireFormat format, const uint8_t* payload,
                     size_t size, PayloadMemory* memory, Local<Value>* out, const char** failure_code,
                     const char** failure_message, InSegments* segments) {
  Isolate* isolate = data->isolate;
  if (format == WireFormat::kJson) {
    Local<String> text;
    // V8 makes no string of more bytes than its maximum string length (a
    // peer that raised maxMessageSize past it can send one): the frame is
    // reported with that reason and skipped, as any undecodable payload is.
    if (size > static_cast<size_t>(String::kMaxLength)) {
      *failure_code = "ERR_PROCWIRE_DECODE";
      *failure_message =
          "payload could not be decoded: its json text is longer than V8's maximum string length";
      return false;
    }
    if (!String::NewFromUtf8(isolate, reinterpret_cast<const char*>(payload), v8::NewStringType::kNormal,
                             static_cast<int>(size))
             .ToLocal(&text)) {
      return false;
    }
    return v8::JSON::Parse(context, text).ToLocal(out);
  }
  return DecodeAdvanced(data, context, payload, size, memory, out, failure_code, failure_message, segments);
}

}  // namespace

bool EncodeFrame(AddonData* data, Local<Context> context, WireFormat format, Local<Value> value,
                 EncodedFrame* out, OutOfLine* ool) {
  if (format == WireFormat::kAdvanced) {
    const bool ok = EncodeAdvanced(data, context, value, out, ool);
    if (!ok && ool != nullptr) AbandonSegments(ool);
    return ok;
  }
  if (!EncodeJson(data, context, value, out)) return false;
  // json has no binary views; a transfer still detaches.
  if (ool != nullptr && !ool->transfer.empty()) {
    OutOfLine detach_only;
    detach_only.transfer = ool->transfer;
    if (!FinishTransfers(data, context, &detach_only)) {
      std::free(out->data);
      out->data = nullptr;
      return false;
    }
  }
  return true;
}

bool DecodePayload(AddonData* data, Local<Context> context, WireFormat format, const uint8_t* payload,
                   size_t size, PayloadMemory* memory, Local<Value>* out, InSegments* segments,
                   uint64_t max_buffer) {
  Isolate* isolate = data->isolate;
  // A resizable ArrayBuffer makes V8 reserve its maxByteLength before any
  // check of ours could run: a 20-byte payload could ask for terabytes.
  // Payloads without the '~' tag byte anywhere cannot hold one and are not
  // scanned; the others are walked, and refused when one is over the limit
  // or when the walk cannot follow them.
  if (format == WireFormat::kAdvanced && size > 0 && std::memchr(payload, '~', size) != nullptr) {
    const ScanResult scan = ScanForOversizedBuffers(payload, size, max_buffer);
    if (scan == ScanResult::kTooLarge) {
      ThrowCodedError(data, context, "ERR_PROCWIRE_DECODE",
                      "a resizable ArrayBuffer's maxByteLength exceeds maxMessageSize");
      return false;
    }
    if (scan == ScanResult::kInconclusive) {
      ThrowCodedError(data, context, "ERR_PROCWIRE_DECODE",
                      "payload could not be decoded (malformed around a resizable ArrayBuffer tag)");
      return false;
    }
  }
  Local<Value> exception;
  const char* failure_code = nullptr;
  const char* failure_message = nullptr;
  {
    TryCatch try_catch(isolate);
    if (DecodeUnchecked(data, context, format, payload, size, memory, out, &failure_code, &failure_message,
                        segments)) {
      return true;
    }
    if (try_catch.HasTerminated()) {
      try_catch.ReThrow();
      return false;
    }
    if (try_catch.HasCaught()) exception = try_catch.Exception();
  }
  if (failure_code != nullptr) {
    ThrowCodedError(data, context, failure_code, failure_message);
    return false;
  }
  // What V8 threw becomes the `cause` of a generic decode error.
  Local<Value> err;
  if (MakeCodedError(data, context, "ERR_PROCWIRE_DECODE", "payload could not be decoded", exception)
          .ToLocal(&err)) {
    isolate->ThrowException(err);
  }
  return false;
}

}  // namespace procwire
