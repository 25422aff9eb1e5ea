// A growable byte buffer that, unlike std::vector<uint8_t>, can expose
// uninitialised capacity for a read(2) to fill and then account the bytes
// without zeroing them.
//
// Ownership: owns its heap block (malloc/realloc/free). Not copyable.
// Threading: single-threaded.
#ifndef PROCWIRE_CORE_BYTE_BUFFER_H_
#define PROCWIRE_CORE_BYTE_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

namespace procwire {

class ByteBuffer {
 public:
  ByteBuffer() = default;
  ~ByteBuffer() { std::free(data_); }
  ByteBuffer(const ByteBuffer&) = delete;
  ByteBuffer& operator=(const ByteBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }

  // Makes room for at least n bytes in total. Aborts on allocation failure,
  // as operator new would: callers bound n before asking.
  void Reserve(size_t n) {
    if (n <= capacity_) return;
    void* p = std::realloc(data_, n);
    if (p == nullptr) throw std::bad_alloc();
    data_ = static_cast<uint8_t*>(p);
    capacity_ = n;
  }

  void Append(const uint8_t* src, size_t n) {
    if (n == 0) return;
    if (size_ + n > capacity_) Reserve(Grow(size_ + n));
    std::memcpy(data_ + size_, src, n);
    size_ += n;
  }

  // Accounts n bytes written directly into data() + size().
  void Commit(size_t n) { size_ += n; }
  void Clear() { size_ = 0; }

  // Gives the block (malloc'd; free() it) to the caller and leaves this
  // buffer empty. Returns nullptr when there is none.
  uint8_t* Release() {
    uint8_t* block = data_;
    data_ = nullptr;
    size_ = capacity_ = 0;
    return block;
  }

  // Frees the block.
  void Reset() {
    std::free(data_);
    data_ = nullptr;
    size_ = capacity_ = 0;
  }

 private:
  size_t Grow(size_t need) const {
    size_t cap = capacity_ < 64 ? 64 : capacity_;
    while (cap < need) cap *= 2;
    return cap;
  }

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace procwire

#endif  // PROCWIRE_CORE_BYTE_BUFFER_H_
