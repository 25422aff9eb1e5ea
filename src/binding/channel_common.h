// What the native channel's files share: includes, the V8 names they use,
// the policies' constants and the counters behind stats(). Included by the
// collaborators' headers (channel_writer.h, channel_reader.h,
// message_batch.h, ring_side.h, segment_side.h, socket_spin.h) and, through
// them, by native_channel_impl.h. No state lives here.
#ifndef PROCWIRE_BINDING_CHANNEL_COMMON_H_
#define PROCWIRE_BINDING_CHANNEL_COMMON_H_

#include <node.h>
#include <uv.h>

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "../core/channel_policy.h"
#include "../core/channel_stats.h"
#include "../core/end_reason.h"
#include "../core/frame_reader.h"
#include "../core/inbound.h"
#include "../core/protocol.h"
#include "../core/socket_io.h"
#include "../core/write_queue.h"
#include "codec.h"
#include "handle_wrap.h"
#include "payload_memory.h"
#include "../core/ring_link.h"
#include "segments.h"

namespace procwire {

using v8::Array;
using v8::ArrayBuffer;
using v8::BackingStore;
using v8::Context;
using v8::Function;
using v8::FunctionCallbackInfo;
using v8::FunctionTemplate;
using v8::Global;
using v8::HandleScope;
using v8::Integer;
using v8::Isolate;
using v8::Local;
using v8::MaybeLocal;
using v8::Number;
using v8::Object;
using v8::Value;

// The read and write policies (src/core/channel_policy.h).
using read_policy::kDirectReadThreshold;
using read_policy::kLargeFrameLimit;
using read_policy::kLargeFrameReadSize;
using read_policy::kLargeFrameSize;
using read_policy::kMaxBytesPerWake;
using read_policy::kMaxReadsPerWake;
using read_policy::kMaxRingPeersChecked;
using read_policy::kMaxRingPollNs;
using read_policy::kMaxRingRecordsPerWake;
using read_policy::kSocketSpinNs;
using read_policy::kSpinYieldContendedNs;
using write_policy::kWidenSendBufferFrame;
using write_policy::kWriteGatheredMinFrame;
using write_policy::kWriteNowThreshold;
// The control frames' first bytes (docs/protocol.md): [0xFE][n] announces a
// message's segments, [0xFD][1] sets up the sender's ring.
using protocol::kRingControlByte;
using protocol::kRingSetupVersion;
using protocol::kSegmentsControlByte;
// Advanced frames up to this size are handed to JavaScript as bytes, to be
// decoded there by the fast path (lib/codec/advanced-fast.js), when the
// channel asked for it (decodeInJs): for small messages, setting up V8's
// ValueDeserializer costs more than the whole JavaScript decode.
constexpr size_t kJsDecodeMaxBytes = 2048;

inline void FreeBlock(uint8_t* data, void* /*hint*/) { std::free(data); }
// For a chunk that starts inside its block: the hint is the block.
inline void FreeHintBlock(uint8_t* /*data*/, void* hint) { std::free(hint); }

struct Counters {
  double messages_in = 0, messages_out = 0, bytes_in = 0, decode_errors = 0, read_calls = 0;
  // Messages (and their segment bytes) that travelled out of line.
  double ool_messages_out = 0, ool_bytes_out = 0, ool_messages_in = 0, ool_bytes_in = 0;
  double histogram_in[kHistogramBuckets] = {};
  double histogram_out[kHistogramBuckets] = {};
};

class NativeChannel;

// Ends the channel with ERR_PROCWIRE_OUT_OF_MEMORY after an allocation for
// the peer's data failed (the reader's and the ring side's reads catch
// std::bad_alloc rather than let it abort the process). Delegate is the
// caller's back-reference: data() and End() are all it needs.
template <typename Delegate>
void EndOutOfMemory(Delegate& delegate, Local<Context> context) {
  Local<Value> err;
  if (!MakeCodedError(delegate.data(), context, "ERR_PROCWIRE_OUT_OF_MEMORY",
                      "out of memory while reading from the peer; the channel was closed")
           .ToLocal(&err)) {
    return;
  }
  delegate.End(EndReason::kOutOfMemory, err);
}

}  // namespace procwire

#endif  // PROCWIRE_BINDING_CHANNEL_COMMON_H_
