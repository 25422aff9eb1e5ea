// The wire protocol's numbers that the native layers use, defined once
// (docs/protocol.md describes each; lib/protocol.js is the JavaScript copy,
// and test/protocol.test.js checks that the two agree).
//
// Pure C++17, constants only: no ownership, no threading concerns.
#ifndef PROCWIRE_CORE_PROTOCOL_H_
#define PROCWIRE_CORE_PROTOCOL_H_

#include <cstddef>
#include <cstdint>

namespace procwire {
namespace protocol {

// Node's host-object tags in `advanced` payloads (lib/internal/child_process/
// serialization.js), then procwire's extension, only between procwire peers
// that announced the `segments` capability.
constexpr uint32_t kHostTagView = 0;
constexpr uint32_t kHostTagOther = 1;
constexpr uint32_t kHostTagSegmentView = 2;

// First payload byte of the control frame [0xFE][n] that announces the next
// frame's n shared-memory segments. A V8 payload always starts with 0xFF.
constexpr uint8_t kSegmentsControlByte = 0xFE;
constexpr size_t kMaxSegmentsPerFrame = 64;
// First payload byte of the control frame [0xFC][n] + n entries of
// kSegmentEntrySize bytes ([kind][u32 id BE][u32 length BE]) that announces
// the next frame's n segments when some are recycled (between peers that
// announced `pool`). Descriptors ride on it for the entries of kinds
// kSegmentSealed and kSegmentPooledNew, in entry order.
constexpr uint8_t kPooledSegmentsControlByte = 0xFC;
constexpr size_t kSegmentEntrySize = 9;
// A single-use sealed segment (id and length unused: 0).
constexpr uint8_t kSegmentSealed = 0;
// A recycled segment the receiver has not mapped yet: map it, remember it
// under `id`.
constexpr uint8_t kSegmentPooledNew = 1;
// A recycled segment the receiver has mapped under `id`.
constexpr uint8_t kSegmentPooled = 2;

// First payload byte of the ring set-up control frame [0xFD][version], which
// carries the sender's outbound ring (memfd) and the signalling end of the
// wake-up link for the ring it reads (src/core/wake.h); only sent to a peer
// that announced `rings: kRingSetupVersion` in its capabilities. Version 1
// carried the writer's own eventfd instead, which a hostile writer could
// keep readable (a semaphore eventfd) and so spin the reader's loop.
constexpr uint8_t kRingControlByte = 0xFD;
constexpr uint8_t kRingSetupVersion = 2;

// Largest message by default, on every path.
constexpr size_t kDefaultMaxMessageSize = 256u * 1024u * 1024u;

}  // namespace protocol
}  // namespace procwire

#endif  // PROCWIRE_CORE_PROTOCOL_H_
