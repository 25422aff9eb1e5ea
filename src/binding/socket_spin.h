// SocketSpin: the short spin of the event loop after a socket read brought
// messages (see socket_spin.cc for why and when).
//
// Ownership and lifetime: a plain member of NativeChannel, created with it;
// its idle handle is made on first use, attached to the channel (so the
// channel is freed only after it closed) and closed with the channel's
// handles (Close). Threading: the environment's thread only.
#ifndef PROCWIRE_BINDING_SOCKET_SPIN_H_
#define PROCWIRE_BINDING_SOCKET_SPIN_H_

#include "channel_common.h"

namespace procwire {

class SocketSpin {
 public:
  // The spin's back-reference to its channel: only what it asks of it.
  class Delegate {
   public:
    explicit Delegate(NativeChannel* channel) : channel_(channel) {}
    uv_loop_t* loop() const;
    // This is the thread's only open channel.
    bool only_channel() const;
    void Attach(uv_handle_t* handle);
    // Reading, neither ended nor closing.
    bool reading() const;

   private:
    NativeChannel* channel_;
  };

  explicit SocketSpin(NativeChannel* channel) : delegate_(channel) {}

  // After a socket read brought messages (and no ring is polled).
  void Start();
  // Messages came while spinning: a hit for the running rate.
  void HitIfSpinning() {
    if (state_ == State::kSpinning) rate_.Hit();
  }
  // Stops and closes the idle handle, if it was ever made.
  void Close(uv_close_cb closed);

 private:
  // kUnused: no idle handle yet; kIdle: made, stopped; kSpinning: started.
  enum class State : uint8_t { kUnused, kIdle, kSpinning };

  void Stop();
  void Turn();
  static void OnIdle(uv_idle_t* handle);

  Delegate delegate_;
  State state_ = State::kUnused;
  uv_idle_t idle_;
  // When the socket was last drained.
  uint64_t drained_ns_ = 0;
  SpinHitRate rate_;
};

}  // namespace procwire

#endif  // PROCWIRE_BINDING_SOCKET_SPIN_H_
