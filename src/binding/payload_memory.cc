#include "payload_memory.h"

#include <cstdlib>
#include <memory>

namespace procwire {

using v8::ArrayBuffer;
using v8::BackingStore;
using v8::Isolate;
using v8::MaybeLocal;

namespace {

void FreeBackingStore(void* data, size_t /*length*/, void* /*hint*/) { std::free(data); }

}  // namespace

ReadBlock::ReadBlock() : data_(static_cast<uint8_t*>(std::malloc(kReadBufferSize))) {}

ReadBlock::~ReadBlock() {
  if (!given_away_) std::free(data_);
}

MaybeLocal<ArrayBuffer> ReadBlock::GetArrayBuffer(Isolate* isolate) {
  if (array_buffer_.IsEmpty()) {
    std::unique_ptr<BackingStore> store =
        ArrayBuffer::NewBackingStore(data_, kReadBufferSize, FreeBackingStore, nullptr);
    given_away_ = true;
    array_buffer_.Reset(isolate, ArrayBuffer::New(isolate, std::move(store)));
  }
  return array_buffer_.Get(isolate);
}

MaybeLocal<ArrayBuffer> ReassembledMemory::GetArrayBuffer(Isolate* isolate) {
  if (array_buffer_.IsEmpty()) {
    size_t offset = 0;
    size_t size = 0;
    uint8_t* block = reader_->TakeReassembled(&offset, &size);
    if (block == nullptr) return {};
    std::unique_ptr<BackingStore> store =
        ArrayBuffer::NewBackingStore(block, size, FreeBackingStore, nullptr);
    array_buffer_ = ArrayBuffer::New(isolate, std::move(store));
  }
  return array_buffer_;
}

}  // namespace procwire
