#include "frame_reader.h"

#include <algorithm>

namespace procwire {

namespace {

// A reassembly buffer up to this size is kept for the next frame that spans
// reads: a stream of large messages then reuses warm memory instead of
// faulting in (and growing, by copies) a fresh block for every one of them.
// A larger one is given back after use, so one huge message does not pin its
// memory.
constexpr size_t kMaxRetainedCapacity = 4u << 20;
// A kept buffer above this size is also given back once this many frames in
// a row were parsed in place (small frames, each within one read): the large
// messages it served have stopped.
constexpr size_t kCheapRetainedCapacity = 256 * 1024;
constexpr uint32_t kSmallFramesBeforeRelease = 64;
// A direct read into the reassembly buffer is offered at least this much
// room (when the frame needs it): the buffer grows by doubling from here, so
// memory stays proportional to the bytes that actually arrived.
constexpr size_t kMinTailGrowth = 256 * 1024;

}  // namespace

ParseResult ParseFrame(WireFormat format, const uint8_t* data, size_t size, size_t max_payload_size) {
  ParseResult r;
  if (format == WireFormat::kAdvanced) {
    if (size < kAdvancedHeaderSize) {
      r.status = ParseResult::Status::kNeedMore;
      r.size_hint = kAdvancedHeaderSize;
      return r;
    }
    const uint32_t length = ReadU32BigEndian(data);
    if (length > max_payload_size) {
      r.status = ParseResult::Status::kError;
      r.error = FramingError::kMessageTooLarge;
      r.declared_size = length;
      return r;
    }
    const size_t total = kAdvancedHeaderSize + static_cast<size_t>(length);
    if (size < total) {
      r.status = ParseResult::Status::kNeedMore;
      r.size_hint = total;
      return r;
    }
    r.status = ParseResult::Status::kOk;
    r.payload_offset = kAdvancedHeaderSize;
    r.payload_size = length;
    r.consumed = total;
    return r;
  }
  // json: a line. memchr is the fastest scan the C library offers. The scan
  // covers at most max + 1 bytes, written so that a max of SIZE_MAX does not
  // wrap max + 1 to 0 (which would hide every newline).
  const size_t scan = max_payload_size < size ? max_payload_size + 1 : size;
  const void* nl = std::memchr(data, '\n', scan);
  if (nl == nullptr) {
    if (size > max_payload_size) {
      r.status = ParseResult::Status::kError;
      r.error = FramingError::kMessageTooLarge;
      r.declared_size = size;
      return r;
    }
    r.status = ParseResult::Status::kNeedMore;
    r.size_hint = 0;
    return r;
  }
  const size_t line = static_cast<const uint8_t*>(nl) - data;
  r.status = ParseResult::Status::kOk;
  r.payload_offset = 0;
  r.payload_size = line;
  r.consumed = line + 1;
  return r;
}

size_t FrameReader::FillPending(const uint8_t* data, size_t size, bool* complete) {
  *complete = false;
  if (format_ == WireFormat::kJson) {
    const void* nl = std::memchr(data, '\n', size);
    const size_t take = nl ? static_cast<const uint8_t*>(nl) - data : size;
    if (pending_.size() + take > max_payload_size_) {
      if (hold_over_limit_) {
        Hold(data, size, pending_.size() + take);
      } else {
        Fail(FramingError::kMessageTooLarge, pending_.size() + take);
      }
      return size;
    }
    if (!pending_.TryAppend(data, take)) {
      Fail(FramingError::kOutOfMemory, pending_.size() + take);
      return size;
    }
    if (nl == nullptr) return size;
    *complete = true;
    return take + 1;
  }
  size_t pos = 0;
  if (pending_.size() < kAdvancedHeaderSize) {
    const size_t take = std::min(kAdvancedHeaderSize - pending_.size(), size);
    if (!pending_.TryAppend(data, take)) {
      Fail(FramingError::kOutOfMemory, kAdvancedHeaderSize);
      return size;
    }
    pos += take;
    if (pending_.size() < kAdvancedHeaderSize) return pos;
    const uint32_t length = ReadU32BigEndian(pending_.data());
    if (length > max_payload_size_) {
      if (hold_over_limit_) {
        Hold(data + pos, size - pos, length);
      } else {
        Fail(FramingError::kMessageTooLarge, length);
      }
      return size;
    }
    // Nothing is reserved for the declared length: the buffer grows only
    // with the bytes that arrive.
    pending_need_ = kAdvancedHeaderSize + static_cast<size_t>(length);
  }
  const size_t take = std::min(pending_need_ - pending_.size(), size - pos);
  if (!pending_.TryAppend(data + pos, take, pending_need_)) {
    Fail(FramingError::kOutOfMemory, pending_need_);
    return size;
  }
  pos += take;
  *complete = pending_.size() == pending_need_;
  return pos;
}

FrameReader::Tail FrameReader::WritableTail() {
  // While the header itself is incomplete pending_need_ is only the header
  // size, not the frame's: bytes committed then would complete a "frame"
  // whose length was never read or checked against the maximum.
  if (error_ != FramingError::kNone || format_ != WireFormat::kAdvanced ||
      pending_.size() < kAdvancedHeaderSize || pending_.size() >= pending_need_) {
    return Tail{nullptr, 0};
  }
  // Grow by doubling, capped at the frame's size: a peer that declares a
  // large frame and sends little of it holds only about twice what it sent.
  const size_t have = pending_.size();
  if (pending_.capacity() - have < kMinTailGrowth && pending_.capacity() < pending_need_) {
    size_t want = std::max(pending_.capacity() * 2, have + kMinTailGrowth);
    if (want > pending_need_) want = pending_need_;
    if (!pending_.TryReserve(want)) {
      Fail(FramingError::kOutOfMemory, pending_need_);
      return Tail{nullptr, 0};
    }
  }
  const size_t room = std::min(pending_.capacity(), pending_need_) - have;
  return Tail{pending_.data() + have, room};
}

FramingError FrameReader::SetMaxPayloadSize(size_t max, bool hold) {
  max_payload_size_ = max;
  hold_over_limit_ = hold;
  if (error_ != FramingError::kNone) return error_;
  if (format_ == WireFormat::kAdvanced) {
    if (pending_.size() >= kAdvancedHeaderSize && pending_need_ - kAdvancedHeaderSize > max) {
      Fail(FramingError::kMessageTooLarge, pending_need_ - kAdvancedHeaderSize);
    }
  } else if (pending_.size() > max) {
    Fail(FramingError::kMessageTooLarge, pending_.size());
  }
  return error_;
}

void FrameReader::Hold(const uint8_t* data, size_t size, uint64_t declared) {
  if (!held_.TryAppend(pending_.data(), pending_.size()) || !held_.TryAppend(data, size)) {
    held_.Reset();
    Fail(FramingError::kOutOfMemory, declared);
    return;
  }
  held_declared_ = declared;
  pending_.Clear();
  pending_need_ = 0;
}

void FrameReader::ReleasePending() {
  pending_need_ = 0;
  small_frames_since_reassembly_ = 0;
  if (pending_.capacity() > kMaxRetainedCapacity) {
    pending_.Reset();
  } else {
    pending_.Clear();
  }
}

void FrameReader::CountFrameInPlace() {
  if (pending_.capacity() <= kCheapRetainedCapacity) return;
  if (++small_frames_since_reassembly_ >= kSmallFramesBeforeRelease) {
    pending_.Reset();
    small_frames_since_reassembly_ = 0;
  }
}

}  // namespace procwire
