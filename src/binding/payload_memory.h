// The PayloadMemory kinds (codec.h) the binding decodes from, so decoded
// views may borrow a payload's bytes instead of copying them:
//   ViewMemory:        a JS view's ArrayBuffer (decode(), NativeFramer);
//   ReadBlock:         a channel's read buffer, given away on first borrow;
//   ReassembledMemory: a large frame the FrameReader reassembled over reads.
//
// Ownership: each is stated on its class. Threading: the isolate's thread.
#ifndef PROCWIRE_BINDING_PAYLOAD_MEMORY_H_
#define PROCWIRE_BINDING_PAYLOAD_MEMORY_H_

#include <v8.h>

#include <cstddef>
#include <cstdint>

#include "../core/frame_reader.h"
#include "codec.h"

namespace procwire {

// One read buffer; small messages arrive many to a read.
constexpr size_t kReadBufferSize = 256 * 1024;
// Decoded views shorter than this are copied out of the read block instead
// of borrowing it (see ReadBlock::min_borrow).
constexpr size_t kMinBorrowFromReadBlock = 4096;
// Reassembled frames at least this large lend their memory to the views
// decoded from them; smaller ones are cheaper to copy than to give away.
constexpr size_t kLendReassembledThreshold = 1024 * 1024;

// Payload memory inside a JS view: decoded views may alias its ArrayBuffer.
// Lives on the stack of one call, like the Local it holds.
class ViewMemory final : public PayloadMemory {
 public:
  explicit ViewMemory(v8::Local<v8::ArrayBuffer> ab)
      : ab_(ab), base_(static_cast<const uint8_t*>(ab->Data())) {}
  const uint8_t* base() const override { return base_; }
  v8::MaybeLocal<v8::ArrayBuffer> GetArrayBuffer(v8::Isolate*) override { return ab_; }

 private:
  v8::Local<v8::ArrayBuffer> ab_;
  const uint8_t* base_;
};

// A read buffer that decoded views may borrow: the first borrow turns the
// block into an ArrayBuffer's backing store, and the channel takes a fresh
// block for its next read. Owned by its channel until given away, then by
// the ArrayBuffer's backing store.
class ReadBlock final : public PayloadMemory {
 public:
  // Check data() for nullptr: a block that could not be allocated.
  ReadBlock();
  ~ReadBlock() override;
  uint8_t* data() { return data_; }
  bool given_away() const { return given_away_; }
  void ReleaseArrayBuffer() { array_buffer_.Reset(); }
  const uint8_t* base() const override { return data_; }
  // A retained small view would otherwise keep the whole 256 KiB block
  // alive (2,000 one-byte Buffers pinned 1,904 blocks); below 4 KiB a copy
  // costs less than the memory it would pin.
  size_t min_borrow() const override { return kMinBorrowFromReadBlock; }
  v8::MaybeLocal<v8::ArrayBuffer> GetArrayBuffer(v8::Isolate* isolate) override;

 private:
  uint8_t* data_;
  bool given_away_ = false;
  // Held only while this block is the current one; a Global because the
  // block outlives the HandleScope of one read.
  v8::Global<v8::ArrayBuffer> array_buffer_;
};

// A reassembled frame's memory: the first borrow takes the reader's block
// and makes it the ArrayBuffer's backing store, so a large frame that spanned
// many reads is not copied once more into its views. Lives on the stack of
// one frame's delivery.
class ReassembledMemory final : public PayloadMemory {
 public:
  ReassembledMemory(FrameReader* reader, const uint8_t* payload, size_t payload_offset)
      : reader_(reader), base_(payload - payload_offset) {}
  const uint8_t* base() const override { return base_; }
  v8::MaybeLocal<v8::ArrayBuffer> GetArrayBuffer(v8::Isolate* isolate) override;

 private:
  FrameReader* reader_;
  const uint8_t* base_;
  v8::Local<v8::ArrayBuffer> array_buffer_;
};

}  // namespace procwire

#endif  // PROCWIRE_BINDING_PAYLOAD_MEMORY_H_
