// NativeChannel's short spin after a socket read brought messages (see
// StartSocketSpin).
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
void NativeChannel::StartSocketSpin() {
  socket_drained_ns_ = MonotonicNs();
  if (data_->open_channels != 1 || !socket_spin_rate_.ShouldSpin()) {
    if (socket_spin_active_) StopSocketSpin();
    return;
  }
  if (socket_spin_active_) return;
  if (!socket_spin_inited_) {
    CHECK_EQ(uv_idle_init(data_->loop, &socket_spin_), 0);
    AttachUvHandle(reinterpret_cast<uv_handle_t*>(&socket_spin_));
    uv_unref(reinterpret_cast<uv_handle_t*>(&socket_spin_));
    socket_spin_inited_ = true;
  }
  socket_spin_active_ = true;
  CHECK_EQ(uv_idle_start(&socket_spin_, OnSocketSpin), 0);
}

void NativeChannel::StopSocketSpin() {
  uv_idle_stop(&socket_spin_);
  socket_spin_active_ = false;
}

// One turn of the event loop while spinning: the loop itself polled the
// socket (with a zero timeout) just before.
void NativeChannel::OnSocketSpin(uv_idle_t* handle) {
  NativeChannel* self = FromUvHandle<NativeChannel>(handle->data);
  if (self->closing_ || self->ended() || !self->reading_) {
    self->StopSocketSpin();
    return;
  }
  if (MonotonicNs() - self->socket_drained_ns_ > kSocketSpinNs) {
    // Nothing came within the window.
    self->StopSocketSpin();
    self->socket_spin_rate_.Missed();
    return;
  }
  const uint64_t before = MonotonicNs();
  sched_yield();
  if (MonotonicNs() - before > kSpinYieldContendedNs) {
    // Another thread had this CPU meanwhile: with more runnable threads
    // than CPUs a spin takes time the others need. It stops, as a miss
    // (a virtual CPU that was briefly descheduled looks the same, so one
    // such yield must not shut the window for long).
    self->StopSocketSpin();
    self->socket_spin_rate_.Missed();
  }
}

}  // namespace procwire
