// The read and write policies of a native channel: how much one wake-up
// reads, when a read's messages go to JavaScript early, when a frame is
// written within send() rather than at the tick's flush. Plain numbers and
// decisions, no V8, no libuv; the binding (src/binding/channel_*.cc) asks
// them, test/cpp/channel_policy_test.cc checks them. Why each bound has its
// value is said beside it; the measurements are in docs/benchmarks.md, "Why
// the native constants".
#ifndef PROCWIRE_CORE_CHANNEL_POLICY_H_
#define PROCWIRE_CORE_CHANNEL_POLICY_H_

#include <cstddef>
#include <cstdint>

namespace procwire {

namespace read_policy {

// Reads per wake-up, and bytes, before yielding to the rest of the loop, so
// one busy peer cannot starve other handles.
constexpr int kMaxReadsPerWake = 32;
constexpr size_t kMaxBytesPerWake = 8 * 1024 * 1024;
// A pending large frame is read straight into its reassembly buffer when at
// least this much of it is missing.
constexpr size_t kDirectReadThreshold = 64 * 1024;
// While the peer sends frames from kLargeFrameSize up to kLargeFrameLimit
// long, the socket is read kLargeFrameReadSize at a time and each read's
// messages go to JavaScript before the next read, as Node's own channel
// does with 64 KiB reads. JavaScript's work per such message (parsing it,
// the handler, the answer) outweighs a crossing, and handing them over early
// sends the answers sooner while the peer's socket keeps being read between
// them. Reading everything first and then running JavaScript for a quarter
// of a megabyte of messages let a plain Node child's socket fill, and its
// sends then went through libuv's write queue, each with a request and a
// callback. Smaller frames keep one kReadBufferSize read and one hand-over
// per wake-up: there the crossing and the system call are the cost. So do
// frames of kLargeFrameLimit and more, which are mostly read straight into
// their reassembly buffers. (The measurements behind each bound are in
// docs/benchmarks.md, "Why the native constants".)
constexpr size_t kLargeFrameSize = 2 * 1024;
constexpr size_t kLargeFrameLimit = 128 * 1024;
constexpr size_t kLargeFrameReadSize = 32 * 1024;
// Ring records delivered per wake-up before yielding to the rest of the loop.
constexpr int kMaxRingRecordsPerWake = 4096;
// The longest one ring wake-up keeps the event loop (delivering and
// spinning) before the rest of the loop gets its turn.
constexpr uint64_t kMaxRingPollNs = 1000000;
// A sched_yield() that took longer than this gave the CPU to another
// thread: the socket spin stops (see NativeChannel::OnSocketSpin).
constexpr uint64_t kSpinYieldContendedNs = 20000;
// The longest socket spin (SocketSpin::Start); when to spin is
// SpinHitRate's to say.
constexpr uint64_t kSocketSpinNs = 30000;
// Other channels' rings a spinning reader looks at per step (see
// OtherRingHasRecords).
constexpr size_t kMaxRingPeersChecked = 64;

// Whether the peer's frames are in the range whose messages go to
// JavaScript after each read (see kLargeFrameSize), by the last frame read.
constexpr bool LargeFrames(size_t last_frame_size) {
  return last_frame_size >= kLargeFrameSize && last_frame_size < kLargeFrameLimit;
}

// How much one read asks for: kLargeFrameReadSize in the large-frame range,
// the channel's read buffer otherwise.
constexpr size_t ReadSize(size_t last_frame_size, size_t buffer_size) {
  return LargeFrames(last_frame_size) ? kLargeFrameReadSize : buffer_size;
}

// Whether the rest of a pending frame is read straight into its reassembly
// buffer (`missing` bytes of it are not here yet).
constexpr bool ReadsDirect(size_t missing) { return missing >= kDirectReadThreshold; }

}  // namespace read_policy

namespace write_policy {

// The first frame at least this large that a channel sends by its socket
// widens the socket's send buffer to kUnixSendBufferSize (unix sockets
// only; see there why small messages keep the kernel's default): from
// 16 KiB on the larger buffer paid (docs/benchmarks.md, "Why the native
// constants").
constexpr size_t kWidenSendBufferFrame = 16 * 1024;
// A frame at least this large, with nothing queued before it, is written to
// the socket within send() (see ShouldWriteNow); so are a tick's gathered
// frames once they add up to this much, when the frame just queued is at
// least kWriteGatheredMinFrame (see WriteOutGathered).
constexpr size_t kWriteNowThreshold = 64 * 1024;
constexpr size_t kWriteGatheredMinFrame = 8 * 1024;

// Whether a frame goes to the socket within send(), for an open channel
// with nothing queued before it: not when the ring takes it; large frames
// always; otherwise only the first message since the last flush (the
// small ones after it are gathered into the flush's one writev).
constexpr bool WriteNow(size_t size, bool ring_takes_it, bool wrote_since_flush) {
  return !ring_takes_it && (size >= kWriteNowThreshold || !wrote_since_flush);
}

// Whether this socket frame widens the socket's send buffer: the first one
// of kWidenSendBufferFrame or more.
constexpr bool WidensSendBuffer(size_t size, bool widened) {
  return size >= kWidenSendBufferFrame && !widened;
}

// Whether a frame just queued makes the tick's gathered frames go out
// within send(): a frame of kWriteGatheredMinFrame or more, with
// kWriteNowThreshold or more queued.
constexpr bool WritesGatheredOut(size_t frame_size, size_t queued_bytes) {
  return frame_size >= kWriteGatheredMinFrame && queued_bytes >= kWriteNowThreshold;
}

}  // namespace write_policy

}  // namespace procwire

#endif  // PROCWIRE_CORE_CHANNEL_POLICY_H_
