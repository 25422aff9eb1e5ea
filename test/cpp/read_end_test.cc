// The read side's end policy (src/core/read_end.h).
#include "read_end.h"

#include <gtest/gtest.h>

namespace procwire {
namespace {

ReadEnd Open() { return ReadEnd{}; }
ReadEnd Closed(EndReason reason, int sys_error = 0) { return ReadEnd{false, reason, sys_error}; }

TEST(ReadEnd, AnOpenStreamWithNothingWrongStaysOpen) {
  const ReadEnd end = JudgeReadEnd(Open(), FramingError::kNone, InboundError::kNone, false, 10);
  EXPECT_TRUE(end.open);
}

TEST(ReadEnd, FramingErrorsEndAnOpenStream) {
  EXPECT_EQ(JudgeReadEnd(Open(), FramingError::kMessageTooLarge, InboundError::kNone, false, 0).reason,
            EndReason::kMessageTooLarge);
  EXPECT_EQ(JudgeReadEnd(Open(), FramingError::kOutOfMemory, InboundError::kNone, false, 0).reason,
            EndReason::kOutOfMemory);
  // A socket error seen first keeps its own reason.
  const ReadEnd end = JudgeReadEnd(Closed(EndReason::kSystemError, EPIPE), FramingError::kMessageTooLarge,
                                   InboundError::kNone, false, 0);
  EXPECT_EQ(end.reason, EndReason::kSystemError);
  EXPECT_EQ(end.sys_error, EPIPE);
}

TEST(ReadEnd, ABrokenControlProtocolEndsTheStreamButAMalformedRingSetupDoesNot) {
  const ReadEnd broken =
      JudgeReadEnd(Open(), FramingError::kNone, InboundError::kMalformedAnnouncement, false, 0);
  EXPECT_FALSE(broken.open);
  EXPECT_EQ(broken.reason, EndReason::kSegmentProtocol);
  // Reported as the ring's corruption (the read side marked the ring).
  const ReadEnd ring = JudgeReadEnd(Open(), FramingError::kNone, InboundError::kMalformedRingSetup, true, 0);
  EXPECT_EQ(ring.reason, EndReason::kRingCorrupt);
  EXPECT_TRUE(JudgeReadEnd(Open(), FramingError::kNone, InboundError::kMalformedRingSetup, false, 0).open);
}

TEST(ReadEnd, ACorruptRingOutranksAPlainEndButNotASocketError) {
  EXPECT_EQ(
      JudgeReadEnd(Closed(EndReason::kEndOfStream), FramingError::kNone, InboundError::kNone, true, 0).reason,
      EndReason::kRingCorrupt);
  EXPECT_EQ(JudgeReadEnd(Closed(EndReason::kSystemError, ECONNRESET), FramingError::kNone,
                         InboundError::kNone, true, 0)
                .reason,
            EndReason::kSystemError);
}

TEST(ReadEnd, AnEndInTheMiddleOfAFrameIsTruncated) {
  EXPECT_EQ(JudgeReadEnd(Closed(EndReason::kEndOfStream), FramingError::kNone, InboundError::kNone, false, 3)
                .reason,
            EndReason::kTruncated);
  EXPECT_EQ(JudgeReadEnd(Closed(EndReason::kSystemError, ECONNRESET), FramingError::kNone,
                         InboundError::kNone, false, 3)
                .reason,
            EndReason::kTruncated);
  // Other socket errors keep their errno; nothing buffered, nothing lost.
  EXPECT_EQ(
      JudgeReadEnd(Closed(EndReason::kSystemError, EPIPE), FramingError::kNone, InboundError::kNone, false, 3)
          .reason,
      EndReason::kSystemError);
  EXPECT_EQ(JudgeReadEnd(Closed(EndReason::kEndOfStream), FramingError::kNone, InboundError::kNone, false, 0)
                .reason,
            EndReason::kEndOfStream);
}

}  // namespace
}  // namespace procwire
