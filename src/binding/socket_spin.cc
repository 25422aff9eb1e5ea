// SocketSpin: the short spin after a socket read brought messages.
#include "native_channel_impl.h"

namespace procwire {

// After the socket brought messages, the event loop polls without
// sleeping for a moment (an idle handle makes libuv's poll timeout 0), so
// that the peer's next write finds this process running. Waking a process
// that sleeps costs the writer's CPU several microseconds of kernel time
// on a virtual machine; a plain Node child whose every answer woke its
// procwire parent spent about a third more system time per message than
// with Node's own (busier) parent, and was slower for it.
//
// The spin pays only while the next message usually comes within a
// short window: each spin (up to kSocketSpinNs) either catches a message
// or misses, and the running hit rate (SpinHitRate, src/core/ring.h)
// decides, so messages 100 µs apart cost one missed probe per 32 messages
// rather than a spin after each. An idle channel never spins.
// The handle is unref'd (it never keeps the process alive), and each turn
// yields the CPU to any other runnable thread; a yield that gave the CPU
// away ends the spin as a miss. Only a thread's single channel spins: a
// master with several busy workers (more runnable processes than CPUs)
// lost about a tenth of its pairs/s to the time its spin took from them.
void SocketSpin::Start() {
  drained_ns_ = MonotonicNs();
  if (!delegate_.only_channel() || !rate_.ShouldSpin()) {
    if (state_ == State::kSpinning) Stop();
    return;
  }
  if (state_ == State::kSpinning) return;
  if (state_ == State::kUnused) {
    CHECK_EQ(uv_idle_init(delegate_.loop(), &idle_), 0);
    delegate_.Attach(reinterpret_cast<uv_handle_t*>(&idle_));
    uv_unref(reinterpret_cast<uv_handle_t*>(&idle_));
  }
  state_ = State::kSpinning;
  CHECK_EQ(uv_idle_start(&idle_, OnIdle), 0);
}

void SocketSpin::Stop() {
  uv_idle_stop(&idle_);
  state_ = State::kIdle;
}

void SocketSpin::Close(uv_close_cb closed) {
  if (state_ == State::kUnused) return;
  uv_idle_stop(&idle_);
  uv_close(reinterpret_cast<uv_handle_t*>(&idle_), closed);
}

void SocketSpin::OnIdle(uv_idle_t* handle) { NativeChannel::FromUv(handle->data)->spin().Turn(); }

// One turn of the event loop while spinning: the loop itself polled the
// socket (with a zero timeout) just before.
void SocketSpin::Turn() {
  if (!delegate_.reading()) {
    Stop();
    return;
  }
  if (MonotonicNs() - drained_ns_ > kSocketSpinNs) {
    // Nothing came within the window.
    Stop();
    rate_.Missed();
    return;
  }
  const uint64_t before = MonotonicNs();
  sched_yield();
  if (MonotonicNs() - before > kSpinYieldContendedNs) {
    // Another thread had this CPU meanwhile: with more runnable threads
    // than CPUs a spin takes time the others need. It stops, as a miss
    // (a virtual CPU that was briefly descheduled looks the same, so one
    // such yield must not shut the window for long).
    Stop();
    rate_.Missed();
  }
}

}  // namespace procwire
