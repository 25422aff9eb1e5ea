// Why a channel's read side ended, defined once. The binding hands the name
// to JavaScript (onend's first argument; binding.endReasons lists them in
// order) and lib/ maps each name to a close reason and error; the JS
// backends use the same names (END_REASONS in lib/transport/contract.js).
//
// Pure C++17, constants only: no ownership, no threading concerns.
#ifndef PROCWIRE_CORE_END_REASON_H_
#define PROCWIRE_CORE_END_REASON_H_

#include <cstddef>
#include <cstdint>

namespace procwire {

enum class EndReason : uint8_t {
  // The peer closed the stream between frames.
  kEndOfStream = 0,
  // A system call on the socket failed (its errno goes with it).
  kSystemError,
  // A frame declared more than maxMessageSize.
  kMessageTooLarge,
  // The inbound control protocol was broken (src/core/inbound.h).
  kSegmentProtocol,
  // The peer closed the stream in the middle of a frame.
  kTruncated,
  // The peer's shared-memory ring failed its checks.
  kRingCorrupt,
  // Memory for a frame or a read could not be allocated.
  kOutOfMemory,
};

// The names, indexed by the enum's value.
constexpr const char* kEndReasonNames[] = {
    "endOfStream", "systemError", "messageTooLarge", "segmentProtocol",
    "truncated",   "ringCorrupt", "outOfMemory",
};
constexpr size_t kEndReasonCount = sizeof(kEndReasonNames) / sizeof(kEndReasonNames[0]);
static_assert(static_cast<size_t>(EndReason::kOutOfMemory) + 1 == kEndReasonCount, "one name per end reason");

constexpr const char* EndReasonName(EndReason reason) { return kEndReasonNames[static_cast<size_t>(reason)]; }

}  // namespace procwire

#endif  // PROCWIRE_CORE_END_REASON_H_
