// Inbound: the segment announcement [0xFE][n], the ring set-up [0xFD][2],
// handle descriptors and the descriptor queue, with a closer that records
// every close (fake descriptor numbers) and, once, real eventfds.
#include "inbound.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <vector>

#include "protocol.h"

namespace procwire {
namespace {

// Records closes; a second close of one descriptor fails the test.
class RecordingCloser final : public DescriptorCloser {
 public:
  void Close(int fd) override {
    EXPECT_TRUE(closed.insert(fd).second) << "descriptor " << fd << " closed twice";
  }
  std::set<int> closed;
};

std::vector<int> Fds(std::initializer_list<int> list) { return std::vector<int>(list); }

const uint8_t kMessage[] = {0xFF, 0x0F, 0x54};

Inbound::Status Announce(Inbound* in, uint8_t n, Inbound::Frame* out) {
  const uint8_t frame[] = {protocol::kSegmentsControlByte, n};
  return in->OnFrame(frame, sizeof(frame), Inbound::Source::kSocket, out);
}

TEST(Inbound, ChannelThatTakesNoDescriptorsClosesThemAtOnce) {
  RecordingCloser closer;
  Inbound in(&closer);
  std::vector<int> fds = Fds({10, 11});
  EXPECT_EQ(in.Receive(&fds), Inbound::Status::kOk);
  EXPECT_TRUE(fds.empty());
  EXPECT_EQ(closer.closed, (std::set<int>{10, 11}));
  EXPECT_EQ(in.pending(), 0u);
}

TEST(Inbound, AnnouncementHandsItsDescriptorsToTheNextMessageInOrder) {
  RecordingCloser closer;
  Inbound in(&closer);
  in.AcceptSegments();
  std::vector<int> fds = Fds({20, 21, 22});
  ASSERT_EQ(in.Receive(&fds), Inbound::Status::kOk);
  Inbound::Frame f;
  ASSERT_EQ(Announce(&in, 2, &f), Inbound::Status::kOk);
  EXPECT_EQ(f.kind, Inbound::FrameKind::kSegmentAnnouncement);
  EXPECT_TRUE(f.fds.empty());
  EXPECT_EQ(in.announced(), 2u);
  EXPECT_EQ(in.pending(), 1u);
  ASSERT_EQ(in.OnFrame(kMessage, sizeof(kMessage), Inbound::Source::kSocket, &f), Inbound::Status::kOk);
  EXPECT_EQ(f.kind, Inbound::FrameKind::kMessage);
  EXPECT_EQ(f.fds, Fds({20, 21}));
  // The message after it owns none.
  ASSERT_EQ(in.OnFrame(kMessage, sizeof(kMessage), Inbound::Source::kSocket, &f), Inbound::Status::kOk);
  EXPECT_TRUE(f.fds.empty());
  EXPECT_TRUE(closer.closed.empty());
  // 22 was never announced: closed once every byte read forms whole frames.
  EXPECT_EQ(in.AfterRead(0), Inbound::Status::kOk);
  EXPECT_EQ(closer.closed, (std::set<int>{22}));
}

TEST(Inbound, AnnouncedSegmentsWaitAcrossReadsForTheirMessage) {
  RecordingCloser closer;
  Inbound in(&closer);
  in.AcceptSegments();
  std::vector<int> fds = Fds({30});
  ASSERT_EQ(in.Receive(&fds), Inbound::Status::kOk);
  Inbound::Frame f;
  ASSERT_EQ(Announce(&in, 1, &f), Inbound::Status::kOk);
  // The read ended between the announcement and its message.
  EXPECT_EQ(in.AfterRead(0), Inbound::Status::kOk);
  EXPECT_TRUE(closer.closed.empty());
  ASSERT_EQ(in.OnFrame(kMessage, sizeof(kMessage), Inbound::Source::kSocket, &f), Inbound::Status::kOk);
  EXPECT_EQ(f.fds, Fds({30}));
}

TEST(Inbound, DescriptorsOfAnIncompleteFrameWait) {
  RecordingCloser closer;
  Inbound in(&closer);
  in.AcceptSegments();
  std::vector<int> fds = Fds({40});
  ASSERT_EQ(in.Receive(&fds), Inbound::Status::kOk);
  EXPECT_EQ(in.AfterRead(1), Inbound::Status::kNeedMore);
  EXPECT_EQ(in.pending(), 1u);
  EXPECT_TRUE(closer.closed.empty());
}

TEST(Inbound, MalformedAnnouncementsAreErrorsAndErrorsAreSticky) {
  const std::vector<std::vector<uint8_t>> bad = {{0xFE}, {0xFE, 0}, {0xFE, 65}, {0xFE, 255}, {0xFE, 1, 0}};
  for (const std::vector<uint8_t>& frame : bad) {
    RecordingCloser closer;
    {
      Inbound in(&closer);
      in.AcceptSegments();
      std::vector<int> fds = Fds({50});
      ASSERT_EQ(in.Receive(&fds), Inbound::Status::kOk);
      Inbound::Frame f;
      f.fds = Fds({99});
      EXPECT_EQ(in.OnFrame(frame.data(), frame.size(), Inbound::Source::kSocket, &f),
                Inbound::Status::kError);
      EXPECT_EQ(in.error(), InboundError::kMalformedAnnouncement);
      EXPECT_EQ(f.fds, Fds({99})) << "out is untouched on error";
      EXPECT_EQ(in.OnFrame(kMessage, sizeof(kMessage), Inbound::Source::kSocket, &f),
                Inbound::Status::kError);
      EXPECT_EQ(in.TakeHandle(), -1);
      // Descriptors that arrive after the error are closed at once.
      fds = Fds({51});
      EXPECT_EQ(in.Receive(&fds), Inbound::Status::kError);
      EXPECT_EQ(closer.closed, (std::set<int>{51}));
    }
    EXPECT_EQ(closer.closed, (std::set<int>{50, 51})) << "the destructor closes what is held";
  }
}

TEST(Inbound, AnnouncementWithoutItsDescriptorsIsAnError) {
  RecordingCloser closer;
  Inbound in(&closer);
  in.AcceptSegments();
  std::vector<int> fds = Fds({60, 61});
  ASSERT_EQ(in.Receive(&fds), Inbound::Status::kOk);
  Inbound::Frame f;
  EXPECT_EQ(Announce(&in, 3, &f), Inbound::Status::kError);
  EXPECT_EQ(in.error(), InboundError::kAnnouncementWithoutDescriptors);
  EXPECT_STREQ(InboundErrorMessage(in.error()), "a segment announcement arrived without its descriptors");
  EXPECT_EQ(in.pending(), 2u) << "nothing was taken";
}

TEST(Inbound, SecondAnnouncementBeforeItsMessageIsAnError) {
  RecordingCloser closer;
  {
    Inbound in(&closer);
    in.AcceptSegments();
    std::vector<int> fds = Fds({70, 71});
    ASSERT_EQ(in.Receive(&fds), Inbound::Status::kOk);
    Inbound::Frame f;
    ASSERT_EQ(Announce(&in, 1, &f), Inbound::Status::kOk);
    EXPECT_EQ(Announce(&in, 1, &f), Inbound::Status::kError);
    EXPECT_EQ(in.error(), InboundError::kAnnouncementNotFollowed);
  }
  EXPECT_EQ(closer.closed, (std::set<int>{70, 71}));
}

TEST(Inbound, WithoutSegmentsAnAnnouncementIsAMessageForTheDecoder) {
  RecordingCloser closer;
  Inbound in(&closer);
  in.AcceptHandles();
  Inbound::Frame f;
  ASSERT_EQ(Announce(&in, 1, &f), Inbound::Status::kOk);
  EXPECT_EQ(f.kind, Inbound::FrameKind::kMessage);
  EXPECT_TRUE(f.fds.empty());
}

TEST(Inbound, TooManyWaitingDescriptorsIsAnErrorAndTheExtraAreClosed) {
  RecordingCloser closer;
  Inbound in(&closer);
  in.AcceptHandles();
  std::vector<int> fds;
  for (int i = 0; i < static_cast<int>(Inbound::kMaxPendingDescriptors) + 3; i++) fds.push_back(1000 + i);
  EXPECT_EQ(in.Receive(&fds), Inbound::Status::kError);
  EXPECT_EQ(in.error(), InboundError::kTooManyDescriptors);
  EXPECT_EQ(in.pending(), Inbound::kMaxPendingDescriptors);
  EXPECT_EQ(closer.closed.size(), 3u);
  EXPECT_EQ(in.AfterRead(0), Inbound::Status::kError);
  EXPECT_EQ(closer.closed.size(), Inbound::kMaxPendingDescriptors + 3);
}

TEST(Inbound, RingSetUpClaimsTwoDescriptorsFromTheSocketOnly) {
  RecordingCloser closer;
  Inbound in(&closer);
  in.AcceptRings();
  std::vector<int> fds = Fds({80, 81, 82});
  ASSERT_EQ(in.Receive(&fds), Inbound::Status::kOk);
  const uint8_t setup[] = {protocol::kRingControlByte, protocol::kRingSetupVersion};
  Inbound::Frame f;
  // From a ring record it is no set-up (descriptors cannot ride there).
  ASSERT_EQ(in.OnFrame(setup, sizeof(setup), Inbound::Source::kRing, &f), Inbound::Status::kOk);
  EXPECT_EQ(f.kind, Inbound::FrameKind::kMessage);
  ASSERT_EQ(in.OnFrame(setup, sizeof(setup), Inbound::Source::kSocket, &f), Inbound::Status::kOk);
  EXPECT_EQ(f.kind, Inbound::FrameKind::kRingSetup);
  EXPECT_EQ(f.fds, Fds({80, 81}));
  EXPECT_EQ(in.pending(), 1u);
}

TEST(Inbound, MalformedRingSetUpsAreErrors) {
  // Version 1 (the writer's own eventfd) and version 3 are not this one.
  const std::vector<std::vector<uint8_t>> bad = {{0xFD}, {0xFD, 1}, {0xFD, 3}, {0xFD, 2, 0}};
  for (const std::vector<uint8_t>& frame : bad) {
    RecordingCloser closer;
    Inbound in(&closer);
    in.AcceptRings();
    std::vector<int> fds = Fds({90, 91});
    ASSERT_EQ(in.Receive(&fds), Inbound::Status::kOk);
    Inbound::Frame f;
    EXPECT_EQ(in.OnFrame(frame.data(), frame.size(), Inbound::Source::kSocket, &f), Inbound::Status::kError);
    EXPECT_EQ(in.error(), InboundError::kMalformedRingSetup);
  }
  // With one descriptor only.
  RecordingCloser closer;
  Inbound in(&closer);
  in.AcceptRings();
  std::vector<int> fds = Fds({92});
  ASSERT_EQ(in.Receive(&fds), Inbound::Status::kOk);
  const uint8_t setup[] = {protocol::kRingControlByte, protocol::kRingSetupVersion};
  Inbound::Frame f;
  EXPECT_EQ(in.OnFrame(setup, sizeof(setup), Inbound::Source::kSocket, &f), Inbound::Status::kError);
}

TEST(Inbound, HandlesTakeTheOldestWaitingDescriptor) {
  RecordingCloser closer;
  Inbound in(&closer);
  EXPECT_EQ(in.TakeHandle(), -1) << "a channel that takes no handles";
  in.AcceptHandles();
  EXPECT_EQ(in.TakeHandle(), -1) << "none waiting";
  std::vector<int> fds = Fds({100, 101});
  ASSERT_EQ(in.Receive(&fds), Inbound::Status::kOk);
  EXPECT_EQ(in.TakeHandle(), 100);
  EXPECT_EQ(in.TakeHandle(), 101);
  EXPECT_EQ(in.TakeHandle(), -1);
  EXPECT_TRUE(closer.closed.empty());
}

// With the default closer, real descriptors are really closed.
TEST(Inbound, DefaultCloserClosesRealDescriptors) {
  std::vector<int> fds;
  for (int i = 0; i < 3; i++) {
    const int fd = eventfd(0, EFD_CLOEXEC);
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
  }
  const std::vector<int> made = fds;
  int kept = -1;
  {
    Inbound in;
    in.AcceptSegments();
    ASSERT_EQ(in.Receive(&fds), Inbound::Status::kOk);
    Inbound::Frame f;
    ASSERT_EQ(Announce(&in, 1, &f), Inbound::Status::kOk);
    ASSERT_EQ(in.OnFrame(kMessage, sizeof(kMessage), Inbound::Source::kSocket, &f), Inbound::Status::kOk);
    ASSERT_EQ(f.fds.size(), 1u);
    kept = f.fds[0];
    // The other two were never announced: closed once the read is whole.
    ASSERT_EQ(in.AfterRead(0), Inbound::Status::kOk);
  }
  EXPECT_EQ(kept, made[0]);
  EXPECT_GE(fcntl(kept, F_GETFD), 0) << "a handed-out descriptor stays open";
  EXPECT_EQ(fcntl(made[1], F_GETFD), -1);
  EXPECT_EQ(fcntl(made[2], F_GETFD), -1);
  close(kept);
}

// The encoder and the parser agree, in both formats: framed and handed to
// OnFrame with two descriptors, the encoded set-up is a ring set-up.
TEST(Inbound, EncodedRingSetUpParsesAsOne) {
  for (WireFormat format : {WireFormat::kAdvanced, WireFormat::kJson}) {
    uint8_t bytes[kRingSetupFrameMax];
    const size_t size = EncodeRingSetupFrame(format, bytes);
    ASSERT_LE(size, kRingSetupFrameMax);
    FrameReader reader(format, 1024);
    RecordingCloser closer;
    Inbound in(&closer);
    in.AcceptRings();
    std::vector<int> fds = Fds({70, 71});
    ASSERT_EQ(in.Receive(&fds), Inbound::Status::kOk);
    int frames = 0;
    ASSERT_EQ(reader.Push(bytes, size,
                          [&](const FrameReader::Frame& f) {
                            Inbound::Frame claimed;
                            ASSERT_EQ(in.OnFrame(f.data, f.size, Inbound::Source::kSocket, &claimed),
                                      Inbound::Status::kOk);
                            EXPECT_EQ(claimed.kind, Inbound::FrameKind::kRingSetup);
                            EXPECT_EQ(claimed.fds, Fds({70, 71}));
                            frames++;
                          }),
              FramingError::kNone);
    EXPECT_EQ(frames, 1);
    EXPECT_EQ(reader.buffered(), 0u);
  }
}

}  // namespace
}  // namespace procwire
