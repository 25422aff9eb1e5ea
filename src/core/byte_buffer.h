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
#include <climits>
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

  // Makes room for at least n bytes in total. Throws std::bad_alloc on
  // allocation failure, as operator new would; TryReserve reports it instead.
  void Reserve(size_t n) {
    if (!TryReserve(n)) throw std::bad_alloc();
  }

  // Makes room for at least n bytes in total; false (nothing changed) when
  // the memory cannot be had.
  bool TryReserve(size_t n) {
    if (n <= capacity_) return true;
    void* p = std::realloc(data_, n);
    if (p == nullptr) return false;
    data_ = static_cast<uint8_t*>(p);
    capacity_ = n;
    return true;
  }

  void Append(const uint8_t* src, size_t n) {
    if (!TryAppend(src, n)) throw std::bad_alloc();
  }

  // Appends n bytes, growing geometrically but never past `limit` bytes of
  // capacity (unless the bytes themselves need more), so a buffer for a
  // frame of known size does not overshoot it. False (nothing appended)
  // when the memory cannot be had.
  bool TryAppend(const uint8_t* src, size_t n, size_t limit = SIZE_MAX) {
    if (n == 0) return true;
    if (size_ + n > capacity_) {
      size_t cap = Grow(size_ + n);
      if (cap > limit) cap = limit < size_ + n ? size_ + n : limit;
      if (!TryReserve(cap)) return false;
    }
    std::memcpy(data_ + size_, src, n);
    size_ += n;
    return true;
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
    while (cap < need) {
      // Doubling cannot wrap: past half of SIZE_MAX, ask for exactly `need`.
      if (cap > SIZE_MAX / 2) return need;
      cap *= 2;
    }
    return cap;
  }

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace procwire

#endif  // PROCWIRE_CORE_BYTE_BUFFER_H_
