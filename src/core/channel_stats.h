// The layout of a channel's statistics, defined once: NativeChannel.stats()
// returns one array of doubles in this order, the binding exports the names
// table as `statsLayout`, and lib/stats.js (the JavaScript handles' copy,
// checked against it by test/protocol.test.js) builds the public stats()
// object from it by name.
#ifndef PROCWIRE_CORE_CHANNEL_STATS_H_
#define PROCWIRE_CORE_CHANNEL_STATS_H_

namespace procwire {
namespace stats {

// Log2-spaced message size buckets: bucket i holds sizes in [2^i, 2^(i+1)).
constexpr int kHistogramBuckets = 32;

enum Index : int {
  kMessagesIn = 0,
  kMessagesOut,
  kBytesIn,
  kBytesOut,
  kQueuedBytes,
  kWriteCalls,
  kReadCalls,
  kDecodeErrors,
  kBufferedBytes,
  // kHistogramBuckets entries each.
  kHistogramIn,
  kHistogramOut = kHistogramIn + kHistogramBuckets,
  kOutOfLineMessagesOut = kHistogramOut + kHistogramBuckets,
  kOutOfLineBytesOut,
  kOutOfLineMessagesIn,
  kOutOfLineBytesIn,
  // Shared-memory rings: 1 once both directions are set up; messages that
  // took a ring each way.
  kRingsEnabled,
  kRingMessagesOut,
  kRingMessagesIn,
  kCount,
};

struct Field {
  const char* name;
  int index;
};

// Every field by its JavaScript name (histograms by their first index).
constexpr Field kFields[] = {
    {"messagesIn", kMessagesIn},
    {"messagesOut", kMessagesOut},
    {"bytesIn", kBytesIn},
    {"bytesOut", kBytesOut},
    {"queuedBytes", kQueuedBytes},
    {"writeCalls", kWriteCalls},
    {"readCalls", kReadCalls},
    {"decodeErrors", kDecodeErrors},
    {"bufferedBytes", kBufferedBytes},
    {"histogramIn", kHistogramIn},
    {"histogramOut", kHistogramOut},
    {"outOfLineMessagesOut", kOutOfLineMessagesOut},
    {"outOfLineBytesOut", kOutOfLineBytesOut},
    {"outOfLineMessagesIn", kOutOfLineMessagesIn},
    {"outOfLineBytesIn", kOutOfLineBytesIn},
    {"ringsEnabled", kRingsEnabled},
    {"ringMessagesOut", kRingMessagesOut},
    {"ringMessagesIn", kRingMessagesIn},
};

}  // namespace stats
}  // namespace procwire

#endif  // PROCWIRE_CORE_CHANNEL_STATS_H_
