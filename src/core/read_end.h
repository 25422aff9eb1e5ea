// How one wake-up's reads ended the stream, decided from what they saw: the
// read side's end policy, apart from the socket and V8 so it can be tested
// on its own (test/cpp/read_end_test.cc). ChannelReader
// (src/binding/channel_reader.cc) fills a ReadEnd from its socket reads and
// asks JudgeReadEnd for the final verdict once the ring was drained too.
//
// Pure C++17: no ownership, no threading concerns.
#ifndef PROCWIRE_CORE_READ_END_H_
#define PROCWIRE_CORE_READ_END_H_

#include <cerrno>
#include <cstddef>

#include "end_reason.h"
#include "frame_reader.h"
#include "inbound.h"

namespace procwire {

// Whether the stream is still open after a wake-up's reads and, if not, why
// (sys_error: the errno that goes with kSystemError).
struct ReadEnd {
  bool open = true;
  EndReason reason = EndReason::kEndOfStream;
  int sys_error = 0;
};

// The verdict once the socket reads (end) and the ring are done:
//   - a framing error, then a broken control protocol (a malformed ring
//     set-up is reported as the ring's corruption instead), end an open
//     stream;
//   - a corrupt ring outranks a plain end of stream, not a socket error;
//   - a stream that ended (or was reset, as a unix peer that exits with
//     unread data does) with part of a frame buffered lost a message: it is
//     truncated, which a plain end or reset would hide.
inline ReadEnd JudgeReadEnd(ReadEnd end, FramingError framing, InboundError inbound, bool ring_corrupt,
                            size_t buffered) {
  if (end.open && framing != FramingError::kNone) {
    end.open = false;
    end.reason =
        framing == FramingError::kOutOfMemory ? EndReason::kOutOfMemory : EndReason::kMessageTooLarge;
  }
  if (end.open && inbound != InboundError::kNone && inbound != InboundError::kMalformedRingSetup) {
    end.open = false;
    end.reason = EndReason::kSegmentProtocol;
  }
  if ((end.open || end.reason == EndReason::kEndOfStream) && ring_corrupt) {
    end.open = false;
    end.reason = EndReason::kRingCorrupt;
  }
  if (!end.open && buffered > 0 &&
      (end.reason == EndReason::kEndOfStream ||
       (end.reason == EndReason::kSystemError && end.sys_error == ECONNRESET))) {
    end.reason = EndReason::kTruncated;
  }
  return end;
}

}  // namespace procwire

#endif  // PROCWIRE_CORE_READ_END_H_
