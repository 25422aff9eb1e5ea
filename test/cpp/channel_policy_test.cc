// The native channel's read and write policies (src/core/channel_policy.h).
#include "channel_policy.h"

#include <gtest/gtest.h>

namespace procwire {
namespace {

TEST(ReadPolicy, LargeFramesAreAHalfOpenRange) {
  using namespace read_policy;
  EXPECT_FALSE(LargeFrames(0));
  EXPECT_FALSE(LargeFrames(kLargeFrameSize - 1));
  EXPECT_TRUE(LargeFrames(kLargeFrameSize));
  EXPECT_TRUE(LargeFrames(kLargeFrameLimit - 1));
  // From the limit on, frames are mostly read into their reassembly
  // buffers: one big read again.
  EXPECT_FALSE(LargeFrames(kLargeFrameLimit));
}

TEST(ReadPolicy, ReadSizeFollowsTheFrames) {
  using namespace read_policy;
  constexpr size_t kBuffer = 256 * 1024;
  EXPECT_EQ(ReadSize(100, kBuffer), kBuffer);
  EXPECT_EQ(ReadSize(kLargeFrameSize, kBuffer), kLargeFrameReadSize);
  EXPECT_EQ(ReadSize(kLargeFrameLimit, kBuffer), kBuffer);
  EXPECT_LT(kLargeFrameReadSize, kBuffer);
}

TEST(ReadPolicy, DirectReadsOnlyForALargeMissingPart) {
  using namespace read_policy;
  EXPECT_FALSE(ReadsDirect(kDirectReadThreshold - 1));
  EXPECT_TRUE(ReadsDirect(kDirectReadThreshold));
}

TEST(ReadPolicy, BudgetsAreBounded) {
  using namespace read_policy;
  EXPECT_GT(kMaxReadsPerWake, 0);
  EXPECT_GT(kMaxBytesPerWake, kLargeFrameReadSize);
  EXPECT_GT(kMaxRingRecordsPerWake, 0);
  // One ring wake-up keeps the loop at most a millisecond.
  EXPECT_LE(kMaxRingPollNs, 1000000u);
  EXPECT_LT(kSocketSpinNs, kMaxRingPollNs);
}

TEST(WritePolicy, TheRingTakesWhatFitsIt) {
  using namespace write_policy;
  EXPECT_FALSE(WriteNow(100, true, false));
  EXPECT_FALSE(WriteNow(kWriteNowThreshold, true, false));
}

TEST(WritePolicy, FirstMessageOfATickAndLargeFramesGoAtOnce) {
  using namespace write_policy;
  EXPECT_TRUE(WriteNow(100, false, false));
  // Later small messages of the same tick wait for the flush's writev.
  EXPECT_FALSE(WriteNow(100, false, true));
  EXPECT_FALSE(WriteNow(kWriteNowThreshold - 1, false, true));
  EXPECT_TRUE(WriteNow(kWriteNowThreshold, false, true));
}

TEST(WritePolicy, SendBufferWidensOnceFromTheThreshold) {
  using namespace write_policy;
  EXPECT_FALSE(WidensSendBuffer(kWidenSendBufferFrame - 1, false));
  EXPECT_TRUE(WidensSendBuffer(kWidenSendBufferFrame, false));
  EXPECT_FALSE(WidensSendBuffer(kWidenSendBufferFrame, true));
}

TEST(WritePolicy, GatheredLargeFramesGoOutOnceTheyAddUp) {
  using namespace write_policy;
  EXPECT_FALSE(WritesGatheredOut(kWriteGatheredMinFrame - 1, 10 * kWriteNowThreshold));
  EXPECT_FALSE(WritesGatheredOut(kWriteGatheredMinFrame, kWriteNowThreshold - 1));
  EXPECT_TRUE(WritesGatheredOut(kWriteGatheredMinFrame, kWriteNowThreshold));
}

}  // namespace
}  // namespace procwire
