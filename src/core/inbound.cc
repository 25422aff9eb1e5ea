#include "inbound.h"

#include <utility>

#include "protocol.h"
#include "socket_io.h"

namespace procwire {

const char* InboundErrorMessage(InboundError error) {
  switch (error) {
    case InboundError::kNone:
      return "no error";
    case InboundError::kTooManyDescriptors:
      return "too many unclaimed descriptors from the peer";
    case InboundError::kMalformedAnnouncement:
      return "malformed segment announcement";
    case InboundError::kAnnouncementWithoutDescriptors:
      return "a segment announcement arrived without its descriptors";
    case InboundError::kAnnouncementNotFollowed:
      return "a segment announcement followed another one before its message";
    case InboundError::kMalformedRingSetup:
      return "malformed ring set-up";
    case InboundError::kUnexpectedPooledAnnouncement:
      return "recycled segments from a peer this end does not take them from";
  }
  return "unknown inbound error";
}

Inbound::Inbound(DescriptorCloser* closer) : closer_(closer) {}

Inbound::~Inbound() {
  for (int fd : pending_) Close(fd);
  for (int fd : announced_) Close(fd);
}

void Inbound::Close(int fd) {
  if (closer_ != nullptr) {
    closer_->Close(fd);
  } else {
    CloseFd(fd);
  }
}

Inbound::Status Inbound::Fail(InboundError error) {
  if (error_ == InboundError::kNone) error_ = error;
  return Status::kError;
}

Inbound::Status Inbound::Receive(std::vector<int>* fds) {
  const bool takes = segments_ || handles_ || rings_;
  bool overflow = false;
  for (int fd : *fds) {
    // After an error nothing is claimed any more: hold nothing new.
    if (takes && error_ == InboundError::kNone && pending_.size() < kMaxPendingDescriptors) {
      pending_.push_back(fd);
    } else {
      Close(fd);
      if (takes) overflow = true;
    }
  }
  fds->clear();
  if (error_ != InboundError::kNone) return Status::kError;
  return overflow ? Fail(InboundError::kTooManyDescriptors) : Status::kOk;
}

Inbound::Status Inbound::OnFrame(const uint8_t* payload, size_t size, Source source, Frame* out) {
  if (error_ != InboundError::kNone) return Status::kError;
  if (rings_ && source == Source::kSocket && size >= 1 && payload[0] == protocol::kRingControlByte) {
    if (size != 2 || payload[1] != protocol::kRingSetupVersion || pending_.size() < 2) {
      return Fail(InboundError::kMalformedRingSetup);
    }
    out->kind = FrameKind::kRingSetup;
    out->fds.clear();
    out->entries.clear();
    for (int i = 0; i < 2; i++) {
      out->fds.push_back(pending_.front());
      pending_.pop_front();
    }
    return Status::kOk;
  }
  if (segments_ && size >= 1 && payload[0] == protocol::kSegmentsControlByte) {
    const size_t count = size == 2 ? payload[1] : 0;
    if (count == 0 || count > protocol::kMaxSegmentsPerFrame)
      return Fail(InboundError::kMalformedAnnouncement);
    if (announcement_open_) return Fail(InboundError::kAnnouncementNotFollowed);
    if (pending_.size() < count) return Fail(InboundError::kAnnouncementWithoutDescriptors);
    for (size_t i = 0; i < count; i++) {
      announced_.push_back(pending_.front());
      pending_.pop_front();
    }
    announcement_open_ = true;
    out->kind = FrameKind::kSegmentAnnouncement;
    out->fds.clear();
    out->entries.clear();
    return Status::kOk;
  }
  if (segments_ && size >= 1 && payload[0] == protocol::kPooledSegmentsControlByte) {
    if (!pooled_) return Fail(InboundError::kUnexpectedPooledAnnouncement);
    std::vector<SegmentEntry> entries;
    size_t count = 0;
    if (!ParseSegmentAnnouncement(payload, size, &entries, &count)) {
      return Fail(InboundError::kMalformedAnnouncement);
    }
    if (announcement_open_) return Fail(InboundError::kAnnouncementNotFollowed);
    if (pending_.size() < count) return Fail(InboundError::kAnnouncementWithoutDescriptors);
    for (size_t i = 0; i < count; i++) {
      announced_.push_back(pending_.front());
      pending_.pop_front();
    }
    announced_entries_ = std::move(entries);
    announcement_open_ = true;
    out->kind = FrameKind::kSegmentAnnouncement;
    out->fds.clear();
    out->entries.clear();
    return Status::kOk;
  }
  out->kind = FrameKind::kMessage;
  out->fds = std::move(announced_);
  announced_.clear();
  out->entries = std::move(announced_entries_);
  announced_entries_.clear();
  announcement_open_ = false;
  return Status::kOk;
}

int Inbound::TakeHandle() {
  if (!handles_ || error_ != InboundError::kNone || pending_.empty()) return -1;
  const int fd = pending_.front();
  pending_.pop_front();
  return fd;
}

Inbound::Status Inbound::AfterRead(size_t buffered) {
  if (buffered > 0) return error_ != InboundError::kNone ? Status::kError : Status::kNeedMore;
  for (int fd : pending_) Close(fd);
  pending_.clear();
  return error_ != InboundError::kNone ? Status::kError : Status::kOk;
}

size_t EncodeRingSetupFrame(WireFormat format, uint8_t* out) {
  if (format == WireFormat::kJson) {
    out[0] = protocol::kRingControlByte;
    out[1] = protocol::kRingSetupVersion;
    out[2] = '\n';
    return 3;
  }
  WriteU32BigEndian(out, 2);
  out[4] = protocol::kRingControlByte;
  out[5] = protocol::kRingSetupVersion;
  return kAdvancedHeaderSize + 2;
}

}  // namespace procwire
