// Frame parsing for Node's child_process IPC wire formats.
//
// This file is pure C++17: no V8 or Node includes. It knows two framings:
//   - advanced: u32 big-endian payload length, then the payload;
//   - json:     the payload, then a single '\n' byte.
//
// Ownership and lifetime: a FrameReader owns the bytes of at most one partial
// frame (the one that spans reads). Frames that lie wholly inside a pushed
// chunk are handed to the visitor as pointers into that chunk (zero copy); a
// reassembled frame points into the reader's own buffer and is valid only for
// the duration of the visitor call.
//
// Threading: a FrameReader is used by one thread at a time; it has no locks.
#ifndef PROCWIRE_CORE_FRAME_READER_H_
#define PROCWIRE_CORE_FRAME_READER_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include "byte_buffer.h"

namespace procwire {

enum class WireFormat : uint8_t { kAdvanced = 0, kJson = 1 };

// Why a stream can no longer be framed. Every value but kNone is fatal for
// the stream: after it, byte boundaries are unknown.
enum class FramingError : uint8_t {
  kNone = 0,
  // A length header (or, for json, a line) exceeds the configured maximum.
  kMessageTooLarge = 1,
  // Memory for the frame in progress could not be allocated. The reader
  // never allocates more than the bytes that have arrived (growing
  // geometrically, capped at the declared size), so this means the process
  // itself is short of memory; the stream is given up rather than aborted.
  kOutOfMemory = 2,
};

constexpr size_t kAdvancedHeaderSize = 4;

// The result of looking for one frame at the start of a contiguous buffer.
struct ParseResult {
  enum class Status : uint8_t { kOk, kNeedMore, kError };
  Status status = Status::kNeedMore;
  // kOk: where the payload starts and how long it is, and how many input
  // bytes the whole frame (header or terminator included) occupies.
  size_t payload_offset = 0;
  size_t payload_size = 0;
  size_t consumed = 0;
  // kNeedMore: how many bytes, counted from the start of the buffer, the
  // frame needs in total; 0 when that is not yet known (json).
  size_t size_hint = 0;
  // kError: why.
  FramingError error = FramingError::kNone;
  // kError with kMessageTooLarge for advanced: the declared payload length.
  uint64_t declared_size = 0;
};

inline uint32_t ReadU32BigEndian(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) |
         (static_cast<uint32_t>(p[2]) << 8) | static_cast<uint32_t>(p[3]);
}

inline void WriteU32BigEndian(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

// Looks for one frame at data[0, size). Never reads past size. Lengths are
// unsigned: a header of 0x80000000 or more is a (large) length, not a
// negative one.
ParseResult ParseFrame(WireFormat format, const uint8_t* data, size_t size, size_t max_payload_size);

// Turns a byte stream, pushed in arbitrary pieces, into frames.
class FrameReader {
 public:
  // A frame handed to the visitor: `in_place` is true when `data` points into
  // the chunk given to Push (so the caller may alias it), false when it points
  // into the reader's reassembly buffer.
  struct Frame {
    const uint8_t* data;
    size_t size;
    bool in_place;
    // For in-place frames: the payload's offset inside the pushed chunk.
    size_t chunk_offset;
  };

  FrameReader(WireFormat format, size_t max_payload_size)
      : format_(format), max_payload_size_(max_payload_size) {}

  FrameReader(const FrameReader&) = delete;
  FrameReader& operator=(const FrameReader&) = delete;

  // Feeds one chunk. Calls visitor(const Frame&) for every complete frame, in
  // stream order. Returns kNone, or the fatal framing error that stopped it;
  // after an error the reader stays failed and Push returns it again.
  template <typename Visitor>
  FramingError Push(const uint8_t* data, size_t size, Visitor&& visitor);

  // When a partial advanced frame of known length is buffered, the caller may
  // read further bytes straight into the reassembly buffer instead of into a
  // chunk, saving a copy for large frames: WritableTail() gives the space,
  // CommitTail(n) accounts n bytes written there. Returns {nullptr, 0} when
  // no such frame is pending.
  struct Tail {
    uint8_t* data;
    size_t size;
  };
  Tail WritableTail();
  // Accounts n bytes written into WritableTail(); calls the visitor if that
  // completed the frame.
  template <typename Visitor>
  void CommitTail(size_t n, Visitor&& visitor);

  // During a visitor call for a reassembled frame (in_place false): takes the
  // reassembly block, so the caller can keep the payload without copying it.
  // The block (malloc'd) starts `*payload_offset` bytes before the payload and
  // holds `*block_size` bytes; the caller frees it with free(). The reader
  // starts a fresh block for the next frame.
  uint8_t* TakeReassembled(size_t* payload_offset, size_t* block_size) {
    *payload_offset = format_ == WireFormat::kAdvanced ? kAdvancedHeaderSize : 0;
    *block_size = pending_.size();
    return pending_.Release();
  }

  // Bytes held for a frame that spans reads, and bytes held unparsed at an
  // over-limit frame (see held()).
  size_t buffered() const { return pending_.size() + held_.size(); }
  // Bytes allocated for it (at least buffered()); grows with the bytes that
  // arrive, never ahead of them by more than a doubling or one tail.
  size_t reserved() const { return pending_.capacity(); }
  // Changes the largest payload accepted, at once: a partial frame already
  // buffered whose declared length (or, for json, whose bytes so far) is
  // over the new limit fails the stream with kMessageTooLarge. Returns the
  // reader's error state afterwards.
  //
  // With `hold`, the new limit is provisional (a handshake's, which the
  // caller raises once the handshake completes): a frame over it met by
  // Push does not fail the stream; Push stops at that frame's first byte
  // and keeps every byte from there on unparsed (held()), and the caller
  // decides with ReleaseHeld once the frames before it were handled.
  FramingError SetMaxPayloadSize(size_t max, bool hold = false);
  // True while bytes are held at an over-limit frame; Push must not be
  // given more bytes until ReleaseHeld took them.
  bool held() const { return held_.size() > 0; }
  // Frames the held bytes from the start again under the limit now in force:
  // when the held frame is still over it, the stream fails (kMessageTooLarge);
  // otherwise the held bytes are pushed (frames in them are never in a
  // caller's chunk: in_place frames point into a buffer freed on return),
  // and may stop at a later over-limit frame again.
  template <typename Visitor>
  FramingError ReleaseHeld(Visitor&& visitor);
  FramingError error() const { return error_; }
  uint64_t error_declared_size() const { return error_declared_size_; }
  WireFormat format() const { return format_; }
  size_t max_payload_size() const { return max_payload_size_; }

 private:
  // Appends from data to the pending frame. Returns how many bytes it took,
  // and sets *complete when the pending frame is now whole.
  size_t FillPending(const uint8_t* data, size_t size, bool* complete);
  void ReleasePending();
  // Keeps the pending bytes and then data[0, size) unparsed, at a frame whose
  // declared (or, for json, scanned) size `declared` is over the
  // provisional limit.
  void Hold(const uint8_t* data, size_t size, uint64_t declared);
  // Called for every frame parsed in place; gives back a large kept
  // reassembly buffer once small frames have followed it for a while.
  void CountFrameInPlace();
  bool Fail(FramingError e, uint64_t declared) {
    error_ = e;
    error_declared_size_ = declared;
    pending_.Clear();
    pending_need_ = 0;
    return false;
  }

  WireFormat format_;
  size_t max_payload_size_;
  // Bytes of the frame in progress, header included for advanced. For json
  // the terminator is not stored.
  ByteBuffer pending_;
  // Total bytes the pending frame needs (advanced, once the header is known);
  // 0 while unknown.
  size_t pending_need_ = 0;
  // Frames parsed in place since the last frame reassembled in pending_.
  uint32_t small_frames_since_reassembly_ = 0;
  FramingError error_ = FramingError::kNone;
  uint64_t error_declared_size_ = 0;
  // Whether the limit is provisional (SetMaxPayloadSize's `hold`), and the
  // bytes held at an over-limit frame with that frame's size.
  bool hold_over_limit_ = false;
  ByteBuffer held_;
  uint64_t held_declared_ = 0;
};

// ---- inline template definitions -----------------------------------------

template <typename Visitor>
FramingError FrameReader::Push(const uint8_t* data, size_t size, Visitor&& visitor) {
  if (error_ != FramingError::kNone) return error_;
  size_t pos = 0;
  if (!pending_.empty() || pending_need_ != 0) {
    bool complete = false;
    pos = FillPending(data, size, &complete);
    if (error_ != FramingError::kNone) return error_;
    if (!complete) return FramingError::kNone;
    const size_t header = format_ == WireFormat::kAdvanced ? kAdvancedHeaderSize : 0;
    visitor(Frame{pending_.data() + header, pending_.size() - header, false, 0});
    ReleasePending();
  }
  while (pos < size) {
    ParseResult r = ParseFrame(format_, data + pos, size - pos, max_payload_size_);
    if (r.status == ParseResult::Status::kOk) {
      visitor(Frame{data + pos + r.payload_offset, r.payload_size, true, pos + r.payload_offset});
      pos += r.consumed;
      CountFrameInPlace();
      continue;
    }
    if (r.status == ParseResult::Status::kError) {
      if (r.error == FramingError::kMessageTooLarge && hold_over_limit_) {
        Hold(data + pos, size - pos, r.declared_size);
        return error_;
      }
      Fail(r.error, r.declared_size);
      return error_;
    }
    // Need more: keep the tail. Only the bytes that arrived are stored; the
    // buffer grows as more come (geometrically, capped at the declared
    // size), so a header alone cannot make us allocate what it declares.
    if (r.size_hint != 0) pending_need_ = r.size_hint;
    if (!pending_.TryAppend(data + pos, size - pos, pending_need_ != 0 ? pending_need_ : SIZE_MAX)) {
      Fail(FramingError::kOutOfMemory, pending_need_);
      return error_;
    }
    // For json the tail cannot contain '\n' (ParseFrame found none), so the
    // pending line only needs the size check.
    if (format_ == WireFormat::kJson && pending_.size() > max_payload_size_) {
      if (hold_over_limit_) {
        Hold(nullptr, 0, pending_.size());
        return error_;
      }
      Fail(FramingError::kMessageTooLarge, pending_.size());
      return error_;
    }
    break;
  }
  return FramingError::kNone;
}

template <typename Visitor>
FramingError FrameReader::ReleaseHeld(Visitor&& visitor) {
  if (error_ != FramingError::kNone || !held()) return error_;
  if (held_declared_ > max_payload_size_) {
    held_.Reset();
    Fail(FramingError::kMessageTooLarge, held_declared_);
    return error_;
  }
  // The held bytes leave held_ first: pushing them may hold again.
  const size_t size = held_.size();
  uint8_t* bytes = held_.Release();
  const FramingError e = Push(bytes, size, visitor);
  std::free(bytes);
  return e;
}

template <typename Visitor>
void FrameReader::CommitTail(size_t n, Visitor&& visitor) {
  pending_.Commit(n);
  if (pending_.size() == pending_need_) {
    visitor(Frame{pending_.data() + kAdvancedHeaderSize, pending_.size() - kAdvancedHeaderSize, false, 0});
    ReleasePending();
  }
}

}  // namespace procwire

#endif  // PROCWIRE_CORE_FRAME_READER_H_
