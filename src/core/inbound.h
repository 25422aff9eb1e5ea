// Inbound: the read side's control protocol and descriptor bookkeeping for
// one stream socket, between the framer (FrameReader) and the decoder.
//
//   - Descriptors received by recvmsg wait in a queue for the frame that
//     claims them: a segment announcement [0xFE][n] (docs/protocol.md), a
//     ring set-up [0xFD][1], or a NODE_HANDLE message (on channels that take
//     handles). A descriptor rides on the first byte of the frame that claims
//     it, so once every byte read so far forms complete frames a descriptor
//     still waiting was never announced: AfterRead() closes it.
//   - A segment announcement is parsed and checked here; its n descriptors
//     then belong to the next message frame, which OnFrame() hands them to.
//
// The binding's read loop drives it: Receive() after each recvmsg, OnFrame()
// for every whole frame in stream order, AfterRead() once per read batch.
// Calls return ok | need-more | error like the framer; an error is sticky
// (the channel is closed by the caller with the coded error for error()).
//
// Ownership: every descriptor given to Receive() is either handed out
// exactly once (in a Frame's fds, or by TakeHandle()), after which the
// caller owns it, or closed through the DescriptorCloser; the destructor
// closes whatever is still held.
// Threading: one thread at a time (the channel's).
#ifndef PROCWIRE_CORE_INBOUND_H_
#define PROCWIRE_CORE_INBOUND_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "frame_reader.h"
#include "shm.h"

namespace procwire {

// Closes descriptors on Inbound's behalf. The default closes them for real;
// tests and the fuzzer substitute one that checks each is closed once.
class DescriptorCloser {
 public:
  virtual ~DescriptorCloser() = default;
  virtual void Close(int fd) = 0;
};

// Why the inbound control protocol failed; each closes the channel.
enum class InboundError : uint8_t {
  kNone = 0,
  // More than kMaxPendingDescriptors received and not yet claimed.
  kTooManyDescriptors,
  // A [0xFE] frame that is not exactly [0xFE][n] with 1 <= n <= 64.
  kMalformedAnnouncement,
  // A segment announcement whose descriptors did not come with it.
  kAnnouncementWithoutDescriptors,
  // A second announcement before the message the first one announced.
  kAnnouncementNotFollowed,
  // A [0xFD] frame that is not exactly [0xFD][version] with its two
  // descriptors.
  kMalformedRingSetup,
  // A [0xFC] announcement (recycled segments) to a channel that did not
  // offer to take them.
  kUnexpectedPooledAnnouncement,
};

// A sentence for the error (static storage).
const char* InboundErrorMessage(InboundError error);

class Inbound {
 public:
  enum class Status { kOk, kNeedMore, kError };
  enum class Source { kSocket, kRing };
  enum class FrameKind {
    // A message for the decoder; fds are the segments announced for it, in
    // reference order (empty when none was announced).
    kMessage,
    // A segment announcement, consumed here (nothing to decode).
    kSegmentAnnouncement,
    // A ring set-up frame; fds are the ring's memfd, then its eventfd.
    kRingSetup,
  };
  struct Frame {
    FrameKind kind = FrameKind::kMessage;
    // Owned by the caller from now on.
    std::vector<int> fds;
    // For a message announced by [0xFC]: one entry per segment, in
    // reference order; fds then hold the descriptors of the entries of
    // kinds kSegmentSealed and kSegmentPooledNew, in entry order. Empty
    // after a [0xFE] announcement (every segment is one of fds).
    std::vector<SegmentEntry> entries;
  };

  // Received descriptors waiting for the frame that claims them. They only
  // wait while that frame is still incomplete; a peer that gets more than
  // this many in flight that way is broken or hostile.
  static constexpr size_t kMaxPendingDescriptors = 256;

  // closer may be null: descriptors are then closed with CloseFd.
  explicit Inbound(DescriptorCloser* closer = nullptr);
  ~Inbound();
  Inbound(const Inbound&) = delete;
  Inbound& operator=(const Inbound&) = delete;

  // What the channel takes; descriptors arriving on a channel that takes
  // none are closed at once. Segments: [0xFE] frames are announcements
  // (otherwise they go to the decoder, which refuses them). Rings: socket
  // frames starting [0xFD] are ring set-ups.
  void AcceptSegments() { segments_ = true; }
  void AcceptHandles() { handles_ = true; }
  void AcceptRings() { rings_ = true; }
  // Recycled segments: [0xFC] frames are announcements (with segments on);
  // otherwise they close the channel.
  void AcceptPooledSegments() { pooled_ = true; }

  // Takes the descriptors one recvmsg brought (fds is emptied). kError when
  // the queue would overflow (the extra descriptors are closed).
  Status Receive(std::vector<int>* fds);

  // One whole frame's payload (no length header, no '\n'), in stream order.
  // kOk with *out filled, or kError (out untouched; nothing handed out).
  Status OnFrame(const uint8_t* payload, size_t size, Source source, Frame* out);

  // The descriptor of a NODE_HANDLE message just delivered from a socket
  // frame (Node's protocol: the descriptor that arrived with or before it),
  // or -1 when none is waiting or the channel does not take handles.
  int TakeHandle();

  // After a read's frames were handed to OnFrame. buffered: the bytes the
  // framer holds of a frame not yet complete. kNeedMore while there are
  // some (waiting descriptors may belong to that frame); kOk otherwise,
  // after closing every descriptor no frame claimed.
  Status AfterRead(size_t buffered);

  bool accepts_handles() const { return handles_; }
  InboundError error() const { return error_; }
  // Descriptors received and not yet claimed or closed.
  size_t pending() const { return pending_.size(); }
  // Segments announced and not yet handed to their message.
  size_t announced() const { return announced_.size(); }

 private:
  Status Fail(InboundError error);
  void Close(int fd);

  DescriptorCloser* closer_;
  bool segments_ = false;
  bool handles_ = false;
  bool rings_ = false;
  bool pooled_ = false;
  std::deque<int> pending_;
  std::vector<int> announced_;
  std::vector<SegmentEntry> announced_entries_;
  bool announcement_open_ = false;
  InboundError error_ = InboundError::kNone;
};

// The encoder beside the parser: the ring set-up control frame
// [0xFD][kRingSetupVersion] as it goes on the socket (with its u32 length
// for `advanced`, followed by '\n' for `json`). Writes at most
// kRingSetupFrameMax bytes to out and returns how many.
constexpr size_t kRingSetupFrameMax = 6;
size_t EncodeRingSetupFrame(WireFormat format, uint8_t* out);

}  // namespace procwire

#endif  // PROCWIRE_CORE_INBOUND_H_
