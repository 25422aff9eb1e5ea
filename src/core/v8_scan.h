// A scan of V8 ValueSerializer payloads for ArrayBuffers whose declared
// size would make the deserializer reserve memory out of proportion to the
// payload: a resizable ArrayBuffer ('~') carries a maxByteLength that V8
// reserves as address space up front, so 20 bytes can ask for terabytes.
//
// This file is pure C++17: no V8 or Node includes. It walks the wire format
// (as written by V8's ValueSerializer, with Node's and procwire's host
// objects) value by value, skipping every field, without building anything.
// It is not a validator: V8 still decodes the payload and rejects what is
// malformed; the scan only has to find, in a payload V8 would accept, every
// resizable ArrayBuffer over the limit. When it cannot follow the payload
// (an unknown tag, too deep a nesting, a truncated field) it says so, and
// the caller decides (procwire refuses such a payload only when it holds the
// '~' byte at all, so ordinary payloads never pay for the scan).
//
// Threading: stateless; any thread.
#ifndef PROCWIRE_CORE_V8_SCAN_H_
#define PROCWIRE_CORE_V8_SCAN_H_

#include <cstddef>
#include <cstdint>

namespace procwire {

enum class ScanResult : uint8_t {
  // Walked to the end of one top-level value; nothing over the limit.
  kClean = 0,
  // A resizable ArrayBuffer declares a maxByteLength over the limit.
  kTooLarge = 1,
  // The walk could not follow the payload (unknown tag, truncated field,
  // nesting deeper than the scan allows).
  kInconclusive = 2,
};

// Scans one payload (V8 header included, no length header). `limit`: the
// largest maxByteLength accepted.
ScanResult ScanForOversizedBuffers(const uint8_t* data, size_t size, uint64_t limit);

}  // namespace procwire

#endif  // PROCWIRE_CORE_V8_SCAN_H_
