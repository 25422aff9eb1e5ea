// Differences between the V8 APIs of the supported Node lines (20: V8 11.3,
// 22: 12.4, 24: 13.6, 26: 14.6), kept in one place so the rest of the binding
// reads the same on all of them.
#ifndef PROCWIRE_BINDING_COMPAT_H_
#define PROCWIRE_BINDING_COMPAT_H_

#include <v8.h>

namespace procwire {

// V8 14 tags embedder pointers with a type; procwire's wrappers each have a
// single internal field, so the default tag is enough.
inline void SetWrapped(v8::Local<v8::Object> object, void* pointer) {
#if V8_MAJOR_VERSION >= 14
  object->SetAlignedPointerInInternalField(0, pointer, v8::kEmbedderDataTypeTagDefault);
#else
  object->SetAlignedPointerInInternalField(0, pointer);
#endif
}

inline void* GetWrapped(v8::Local<v8::Object> object) {
#if V8_MAJOR_VERSION >= 14
  return object->GetAlignedPointerFromInternalField(0, v8::kEmbedderDataTypeTagDefault);
#else
  return object->GetAlignedPointerFromInternalField(0);
#endif
}

// The UTF-8 size of a string, and its UTF-8 bytes written into `buffer`
// (which holds at least that many; no terminator), with lone surrogates as
// U+FFFD, as String::Utf8Value gives them. V8 13 replaced the int-sized calls.
inline size_t Utf8Size(v8::Isolate* isolate, v8::Local<v8::String> string) {
#if V8_MAJOR_VERSION >= 13
  return string->Utf8LengthV2(isolate);
#else
  return static_cast<size_t>(string->Utf8Length(isolate));
#endif
}

inline size_t WriteUtf8(v8::Isolate* isolate, v8::Local<v8::String> string, char* buffer, size_t capacity) {
#if V8_MAJOR_VERSION >= 13
  return string->WriteUtf8V2(isolate, buffer, capacity, v8::String::WriteFlags::kReplaceInvalidUtf8);
#else
  return static_cast<size_t>(
      string->WriteUtf8(isolate, buffer, static_cast<int>(capacity), nullptr,
                        v8::String::NO_NULL_TERMINATION | v8::String::REPLACE_INVALID_UTF8));
#endif
}

// The string's `length` characters written one byte each into `buffer`
// (each character's low byte), or as UTF-16 code units in the host's byte
// order. V8 13 replaced the int-sized calls.
inline void WriteOneByte(v8::Isolate* isolate, v8::Local<v8::String> string, uint8_t* buffer,
                         uint32_t length) {
#if V8_MAJOR_VERSION >= 13
  string->WriteOneByteV2(isolate, 0, length, buffer);
#else
  string->WriteOneByte(isolate, buffer, 0, static_cast<int>(length), v8::String::NO_NULL_TERMINATION);
#endif
}

inline void WriteTwoByte(v8::Isolate* isolate, v8::Local<v8::String> string, uint16_t* buffer,
                         uint32_t length) {
#if V8_MAJOR_VERSION >= 13
  string->WriteV2(isolate, 0, length, buffer);
#else
  string->Write(isolate, buffer, 0, static_cast<int>(length), v8::String::NO_NULL_TERMINATION);
#endif
}

// Whether this build's integers are little-endian (every platform procwire
// ships for is).
constexpr bool kLittleEndianHost = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

}  // namespace procwire

#endif  // PROCWIRE_BINDING_COMPAT_H_
