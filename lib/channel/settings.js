'use strict';
// Every option a Channel takes, its default and the reason for it.

const {
  invalidArg, validateObject, validateSerialization, validateMaxMessageSize, validateSize,
} = require('../validate');

// send() returns false once this many bytes wait to be written, and 'drain'
// follows when the queue is back under it. Node's own IPC uses 128 KiB with
// no 'drain'; a larger mark keeps a pipelining sender busy between ticks.
const DEFAULT_HIGH_WATER_MARK = 1024 * 1024;
// Past this many queued bytes the channel is closed (ERR_PROCWIRE_QUEUE_LIMIT).
const DEFAULT_MAX_QUEUED_BYTES = 1024 * 1024 * 1024;
// Messages that arrive while nobody listens are kept (as Node does) up to this
// many; past it the channel stops reading until a listener comes, so the peer
// sees backpressure instead of our memory growing.
const MAX_BACKLOG = 10000;
// ... and up to this many bytes (frame bytes, segments included): 10,000
// large messages would otherwise be a backlog of gigabytes.
const MAX_BACKLOG_BYTES = 64 * 1024 * 1024;
// Requests answered at once by respond(); more wait in arrival order, and
// past MAX_WAITING_REQUESTS waiting ones reading pauses (the peer feels
// backpressure). Nothing is dropped.
const DEFAULT_MAX_CONCURRENT_REQUESTS = 1024;
const MAX_WAITING_REQUESTS = 1024;
// From this many bytes a view goes through shared memory rather than the
// socket (procwire peers on unix sockets): below it the memfd set-up costs
// more than copying the bytes through the socket (bench/latency.js measures
// the crossover).
const DEFAULT_OUT_OF_LINE_THRESHOLD = 256 * 1024;
// Segments sent but not yet acknowledged by the peer: past this, send()
// returns false (their bytes count towards highWaterMark and maxQueuedBytes
// too). Each is a descriptor in flight, and the kernel caps those per user.
const DEFAULT_MAX_SEGMENTS_IN_FLIGHT = 128;
// Recycled segments (segmentPool): at most this many bytes and segments of
// pre-faulted shared memory per channel and direction, idle or in flight.
// Past the bound a message takes a fresh sealed segment instead. Four 64 MiB
// messages in flight fit, and so do many small ones. The count must cover
// about 64 MiB of messages from the out-of-line threshold (256 KiB) up: the
// receiving process hands a segment back only once the Buffer over it is
// garbage-collected, and V8 collects such Buffers about once per 64 MiB of
// them (its external-memory limit), however small the heap. At 16, a stream
// of 1 MiB messages ran out after 16 and the rest each took a fresh sealed
// segment (memfd_create, a page fault on every page, a map and an unmap in
// the receiver, about 500 us each), and those waited for the same collection
// before they were unmapped, so the bound also held less memory back than
// it let through. Each segment is one mapping in the sending process while
// it exists; idle ones are dropped after segmentPoolIdleTimeout.
const DEFAULT_SEGMENT_POOL_BYTES = 256 * 1024 * 1024;
const DEFAULT_SEGMENT_POOL_COUNT = 256;
// Idle recycled segments are dropped (and the peer told to unmap them) once
// no segment came back for this many ms.
const DEFAULT_SEGMENT_POOL_IDLE = 5000;
// A request with no reply in this many ms rejects (ERR_PROCWIRE_REQUEST_TIMEOUT),
// so a peer that never answers cannot hang the caller and keep its process
// alive for ever. Per channel `requestTimeout`, per request `timeout`; 0: none.
const DEFAULT_REQUEST_TIMEOUT = 30000;
const MAX_TIMEOUT = 2 ** 31 - 1;
const OUT_OF_LINE_MODES = ['auto', 'always', 'never'];

// Every option a Channel takes, checked (coded errors) and with defaults
// filled in; segmentPool stays undefined when unset (its default depends on
// the transport). fork() calls this before it spawns, so that a bad option
// throws with no child behind it.
function channelSettings(options) {
  options = validateObject(options, 'options');
  const outOfLine = options.outOfLine === undefined ? 'auto' : options.outOfLine;
  if (!OUT_OF_LINE_MODES.includes(outOfLine)) throw invalidArg('outOfLine must be "auto", "always" or "never"');
  const rings = options.rings === undefined ? 'auto' : options.rings;
  if (rings !== 'auto' && rings !== 'never') throw invalidArg('rings must be "auto" or "never"');
  if (options.segmentPool !== undefined && typeof options.segmentPool !== 'boolean') {
    throw invalidArg('segmentPool must be a boolean');
  }
  const maxConcurrentRequests = validateSize(options.maxConcurrentRequests, 'maxConcurrentRequests',
    DEFAULT_MAX_CONCURRENT_REQUESTS, 2 ** 31 - 1);
  if (maxConcurrentRequests < 1) throw invalidArg('maxConcurrentRequests must be at least 1');
  return {
    serialization: validateSerialization(options.serialization),
    maxMessageSize: validateMaxMessageSize(options.maxMessageSize),
    highWaterMark: validateSize(options.highWaterMark, 'highWaterMark', DEFAULT_HIGH_WATER_MARK),
    // A hard cap behind the soft one: a sender that ignores send() === false
    // while its peer has stopped reading would otherwise grow without bound.
    maxQueuedBytes: validateSize(options.maxQueuedBytes, 'maxQueuedBytes', DEFAULT_MAX_QUEUED_BYTES),
    requestTimeout: validateSize(options.requestTimeout, 'requestTimeout', DEFAULT_REQUEST_TIMEOUT, MAX_TIMEOUT),
    outOfLine,
    outOfLineThreshold: validateSize(options.outOfLineThreshold, 'outOfLineThreshold', DEFAULT_OUT_OF_LINE_THRESHOLD),
    rings,
    maxConcurrentRequests,
    maxSegmentsInFlight: validateSize(options.maxSegmentsInFlight, 'maxSegmentsInFlight', DEFAULT_MAX_SEGMENTS_IN_FLIGHT),
    segmentPool: options.segmentPool,
    segmentPoolMaxBytes: validateSize(options.segmentPoolMaxBytes, 'segmentPoolMaxBytes', DEFAULT_SEGMENT_POOL_BYTES),
    segmentPoolMaxCount: validateSize(options.segmentPoolMaxCount, 'segmentPoolMaxCount', DEFAULT_SEGMENT_POOL_COUNT, 65536),
    segmentPoolIdleTimeout: validateSize(options.segmentPoolIdleTimeout, 'segmentPoolIdleTimeout',
      DEFAULT_SEGMENT_POOL_IDLE, MAX_TIMEOUT),
  };
}

module.exports = {
  channelSettings, DEFAULT_HIGH_WATER_MARK, DEFAULT_REQUEST_TIMEOUT, DEFAULT_OUT_OF_LINE_THRESHOLD,
  MAX_BACKLOG, MAX_BACKLOG_BYTES, MAX_WAITING_REQUESTS, MAX_TIMEOUT,
};
