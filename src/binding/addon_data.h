// Per-environment state of the addon (one per main thread or worker, one per
// realm the addon is loaded in).
//
// Ownership: created in the module initialiser, freed by the environment's
// cleanup hook, which also closes every channel and listener still open.
// Threading: used only on its environment's thread.
#ifndef PROCWIRE_BINDING_ADDON_DATA_H_
#define PROCWIRE_BINDING_ADDON_DATA_H_

#include <node.h>
#include <uv.h>
#include <v8.h>

#include <unordered_set>
#include <vector>

#include "compat.h"

namespace procwire {

class Closable {
 public:
  virtual ~Closable() = default;
  // Closes now, without calling back into JavaScript (environment teardown).
  virtual void CloseForTeardown() = 0;
};

// A channel whose event loop reads a shared-memory ring. A reader that
// spins waiting for its own ring stops as soon as another ring of its
// thread has records, so one busy channel does not keep the others waiting
// (a master with many workers).
class LoopRingReader {
 public:
  virtual ~LoopRingReader() = default;
  // Records are waiting that this reader would deliver now (a cheap check:
  // no fence, no validation).
  virtual bool RingRecordsWaiting() const = 0;
};

struct AddonData {
  explicit AddonData(v8::Isolate* isolate);
  ~AddonData();

  v8::Isolate* isolate;
  uv_loop_t* loop;
  // Set once by the JS side through setup(): the real Buffer constructor
  // (captured before user code could replace it) and a factory for coded
  // errors, so every error class lives in JavaScript, in one place.
  v8::Global<v8::Function> buffer_constructor;
  v8::Global<v8::Function> make_error;
  std::unordered_set<Closable*> open_handles;
  // Channels reading a ring on this thread (see LoopRingReader); a channel is
  // listed from its ring's set-up until it closes.
  std::vector<const LoopRingReader*> ring_readers;
  // Open channels on this thread (from creation to close): a channel's
  // socket spin runs only while it is the only one (see SocketSpin::Start).
  int open_channels = 0;
  // Handles whose uv_close has started but whose close callback has not run.
  // The environment's teardown cannot free this object until they finish,
  // because their callbacks still read it.
  int closing_handles = 0;
  bool tearing_down = false;

  // Called by a handle's close callback, last. Frees this object when the
  // environment is gone and no other handle still needs it.
  void HandleClosed() {
    closing_handles--;
    if (tearing_down && closing_handles == 0) delete this;
  }

  // The environment's cleanup hook: closes every handle still open without
  // calling into JavaScript, then frees this object (now, or after the last
  // close callback).
  static void Teardown(void* arg);

  static AddonData* From(const v8::FunctionCallbackInfo<v8::Value>& args) {
    return static_cast<AddonData*>(args.Data().As<v8::External>()->Value());
  }
};

// Makes an error through the JS factory: an instance of the class for `code`.
// Returns an empty handle if the factory itself threw.
v8::MaybeLocal<v8::Value> MakeCodedError(AddonData* data, v8::Local<v8::Context> context, const char* code,
                                         const char* message,
                                         v8::Local<v8::Value> cause = v8::Local<v8::Value>());
// Throws such an error (or lets the factory's own exception stand).
void ThrowCodedError(AddonData* data, v8::Local<v8::Context> context, const char* code, const char* message);

v8::Local<v8::String> OneByteString(v8::Isolate* isolate, const char* s);

// A failed system call reaches JavaScript as its errno's name ("EPIPE"),
// never as a number: error is a positive errno (src/core returns -errno).
v8::Local<v8::String> ErrnoName(v8::Isolate* isolate, int error);

}  // namespace procwire

#endif  // PROCWIRE_BINDING_ADDON_DATA_H_
