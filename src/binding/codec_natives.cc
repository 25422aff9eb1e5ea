// The JS-callable helpers of the advanced codec's JavaScript fast path
// (lib/codec): writeString and readOneByteString, which copy a string's
// characters between V8 and the frame's memory in one call. Registered by
// functions.cc. Ownership: they keep nothing; the memory is the caller's
// ArrayBuffer. Threading: the isolate's thread only.
#include <cstdint>

#include "../core/v8_string.h"
#include "codec.h"
#include "compat.h"

namespace procwire {

using v8::ArrayBuffer;
using v8::Local;
using v8::Number;
using v8::String;
using v8::Value;

void WriteString(const v8::FunctionCallbackInfo<Value>& args) {
  CHECK(args[0]->IsString());
  CHECK(args[1]->IsArrayBuffer());
  // Offsets are numbers, not uint32s: a frame can outgrow 4 GiB. Each is
  // read once (Number::Value is a call, and this runs for every string).
  CHECK(args[2]->IsNumber());
  CHECK(args[3]->IsNumber());
  const double frame_start_arg = args[2].As<Number>()->Value();
  const double offset_arg = args[3].As<Number>()->Value();
  CHECK(frame_start_arg >= 0 && offset_arg >= 0);
  constexpr double kDecline = -1;
  constexpr double kNoRoom = -2;
  const Local<String> string = args[0].As<String>();
  const Local<ArrayBuffer> target = args[1].As<ArrayBuffer>();
  const size_t frame_start = static_cast<size_t>(frame_start_arg);
  const size_t offset = static_cast<size_t>(offset_arg);
  // A target detached meanwhile has no bytes: declined like any other
  // target without room for what the caller reserved.
  const size_t capacity = target->ByteLength();
  if (frame_start > offset || offset > capacity) {
    args.GetReturnValue().Set(kDecline);
    return;
  }
  const uint32_t length = static_cast<uint32_t>(string->Length());
  // One byte wide when V8 stores it so (IsOneByte() reads only the
  // representation, and has no false positives) and, as the JavaScript path
  // always did, when every character fits in a byte: the receiver reads the
  // same string either way.
  const bool two_byte = !string->IsOneByte() && !string->ContainsOnlyOneByte();
  const uint64_t byte_length = two_byte ? 2 * static_cast<uint64_t>(length) : length;
  if (byte_length > 0xffffffffu) {
    args.GetReturnValue().Set(kDecline);
    return;
  }
  const size_t header =
      v8_string::HeaderSize(two_byte, static_cast<uint32_t>(byte_length), offset - frame_start);
  if (header + byte_length > capacity - offset) {
    args.GetReturnValue().Set(kNoRoom);
    return;
  }
  uint8_t* const out = static_cast<uint8_t*>(target->Data()) + offset;
  // UTF-16 code units are written in place, in the host's byte order, which
  // must be the format's little-endian, at an address aligned for them.
  if (two_byte &&
      (!kLittleEndianHost || reinterpret_cast<uintptr_t>(out + header) % alignof(uint16_t) != 0)) {
    args.GetReturnValue().Set(kDecline);
    return;
  }
  uint8_t* const chars =
      v8_string::WriteHeader(out, two_byte, static_cast<uint32_t>(byte_length), offset - frame_start);
  if (two_byte) {
    WriteTwoByte(args.GetIsolate(), string, reinterpret_cast<uint16_t*>(chars), length);
  } else {
    WriteOneByte(args.GetIsolate(), string, chars, length);
  }
  const uint64_t next = offset + header + byte_length;
  // A small integer is returned without a heap number.
  if (next <= 0x7fffffff) {
    args.GetReturnValue().Set(static_cast<int32_t>(next));
  } else {
    args.GetReturnValue().Set(static_cast<double>(next));
  }
}

void ReadOneByteString(const v8::FunctionCallbackInfo<Value>& args) {
  CHECK(args[1]->IsUint32());
  CHECK(args[2]->IsUint32());
  const uint32_t start = args[1].As<v8::Uint32>()->Value();
  const uint32_t end = args[2].As<v8::Uint32>()->Value();
  // The memory under a view the caller was handed: an ArrayBuffer or a
  // SharedArrayBuffer. Anything else is the caller's mistake, answered with
  // undefined (its decoder then leaves the payload to ValueDeserializer).
  const uint8_t* bytes;
  size_t length;
  if (args[0]->IsArrayBuffer()) {
    const Local<ArrayBuffer> memory = args[0].As<ArrayBuffer>();
    bytes = static_cast<const uint8_t*>(memory->Data());
    length = memory->ByteLength();
  } else if (args[0]->IsSharedArrayBuffer()) {
    const Local<v8::SharedArrayBuffer> memory = args[0].As<v8::SharedArrayBuffer>();
    bytes = static_cast<const uint8_t*>(memory->Data());
    length = memory->ByteLength();
  } else {
    return;
  }
  // A buffer detached since the caller looked it up has no bytes left.
  if (start > end || end > length) return;
  Local<String> string;
  if (String::NewFromOneByte(args.GetIsolate(), bytes + start, v8::NewStringType::kNormal,
                             static_cast<int>(end - start))
          .ToLocal(&string)) {
    args.GetReturnValue().Set(string);
  }
}

}  // namespace procwire
