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

}  // namespace procwire

#endif  // PROCWIRE_BINDING_COMPAT_H_
