'use strict';
// The contract between Channel (lib/channel/, the policy: backpressure,
// request/reply, lifecycle) and a backend handle (the mechanism: bytes on
// one transport). Every backend in this folder implements it; Channel calls
// nothing else on a handle, and a handle reaches its Channel only through the
// callbacks listed here.
//
// Handle methods (required):
//   write(value[, transfer]) -> total bytes queued so far; encodes one
//                       message (throws a coded error, queuing nothing, if
//                       it cannot be encoded)
//   writeBuffer(bytes[, fds]) -> total bytes queued; a pre-built frame
//   flush()          -> total bytes written so far, or an errno name such
//                       as 'EPIPE' (the socket failed; Channel closes)
//   readStart(), readStop()   start / stop delivering onread
//   ref(), unref()            keep / stop keeping the event loop alive
//   close()                   release everything; no callback after it
//   stats()          -> one array in the layout of lib/stats.js (STATS)
// Handle methods that come with a capability (checkHandle checks that a
// handle declaring one has them; Channel calls them only then):
//   setMaxMessageSize(n) -> false when a frame already buffered is over n
//                       (readLimit)
//   written()        -> total bytes written so far, without writing: a
//                       channel closed abruptly settles the callbacks of
//                       what was already written as sent (written)
//   fd()             -> the socket's descriptor, when there is one (fd)
//   acceptHandles()  descriptors beside NODE_HANDLE frames are passed to
//                       onread's fds (handles)
//   enableOutOfLine()   the peer takes segments: views from the segment
//                       threshold on go out of line (segments)
//   writeFrame(bytes, length) -> total bytes queued; an advanced frame the
//                       JavaScript encoder wrote (lib/codec/advanced-fast.js)
//                       (frames)
//   stageFrames(buffer), writeStaged(length) -> total bytes queued: frames
//                       encoded back to back into `buffer` (the channel's
//                       for its whole life), handed over in one call per
//                       batch; throws ERR_PROCWIRE_OUT_OF_MEMORY only
//                       (stagedWrites)
//   decodeInJs(bytes, frames)  small advanced frames are left for
//                       JavaScript to decode (see onread) (jsDecode)
//   allowRings([answer])  accept the peer's ring set-up (answer: set up
//                       ours in reply, the hello's server side) (rings)
//   enableRings()    -> total bytes queued; queues this end's ring set-up
//                       frame (rings)
//   acceptSegmentPool(maxMappedBytes)  take the peer's recycled segments,
//                       mapping at most this many bytes of them (segmentPool)
//   enableSegmentPool(maxBytes, maxCount)  send through recycled segments
//                       (segmentPool)
//   recycleSegments(ids) -> true, or false for an id not in flight; the
//                       peer returned them (segmentPool)
//   takeDroppedSegments(), trimSegments() -> ids this end dropped (or
//                       null), for the peer to unmap (segmentPool)
//   forgetSegments(ids)  the peer dropped these; unmap them (segmentPool)
//   segmentPoolStats() -> the pool's counts, for tests (segmentPool)
//   writeRequest(id, body), writeResponse(id, ok, bodyOrError)
//                       with capability `requests`: the transport carries
//                       request/reply natively (NATS request subjects), so
//                       Channel hands it ids and bodies instead of its own
//                       NODE_PROCWIRE_REQ/RES messages
//
// The native backend (native-handle.js) constructs its handle as
//   new NativeChannel(fd, format, maxMessageSize, connecting, callbacks,
//                     segmentThreshold[, segmentCounters])
// segmentCounters: a Float64Array(2) the addon writes [segment bytes sent,
// segments sent] into, for the channel's backpressure.
//
// Callbacks the handle calls (Channel passes them to createHandle):
//   onread(messages, errors, segments, segmentBytes, frameBytes, fds[, smallBytes, smallFrames])
//       messages: decoded values in order; errors: [index, err, ...] frames
//       that failed to decode before messages[index] (skipped, the stream is
//       intact); segments/segmentBytes: shared memory taken in this batch;
//       frameBytes: the batch's bytes; fds: [index, fd, ...] descriptors that
//       came with messages[index]; smallBytes/smallFrames (a native handle
//       after decodeInJs()): frames left for JavaScript to decode, their
//       payloads back to back in a Buffer and [index, offset, length]
//       triples in a Uint32Array, each the value of messages[index]
//   onwrite(totalWritten)     bytes the transport has taken since the start
//   onend(reason, err, errnoName)  the stream ended (Channel closes):
//                             reason one of END_REASONS; err the coded
//                             error that goes with it, if any; errnoName
//                             ('ECONNRESET', ...) with 'systemError'.
//                             System errors are named, never numbered.
//   onconnect()               a connecting handle is connected
//   onrequest(id, body)       capability `requests`: the peer asks
//   onresponse(id, ok, bodyOrError)  capability `requests`: the peer's reply,
//                             its body or its responder's serialized error
//   onrequestfailed(id, err)  capability `requests`: request `id` failed on
//                             the way (a coded error such as
//                             ERR_PROCWIRE_PEER_UNREACHABLE)
//   onsegmentreturn(ids)      capability `segmentPool`: recycled segments
//                             whose Buffers were collected here, for the
//                             peer to reuse
//   onstatus(status)          the transport's connection status (NATS
//                             reconnects), emitted as 'status'
//   onerror(err)              a non-fatal transport error, for 'error'
//   onfail(err)               a fatal transport error: Channel closes with it
//
// Capabilities (handle.capabilities, a frozen object; absent means none):
//   descriptors  descriptors can ride on frames (unix sockets)
//   segments     shared-memory segments can be sent out of line
//   handles      Node's NODE_HANDLE protocol (net.Socket, net.Server, ...)
//   rings        shared-memory rings (set up by the ring integration)
//   requests     native request/reply (writeRequest/writeResponse)
//   retries      a request or its reply may be lost while the channel stays
//                open (core NATS), so request() takes `retries` and sends it
//                again (lib/channel/request-retry.js); no methods
//   frames, stagedWrites, jsDecode, segmentPool, readLimit, fd, written:
//                the methods of the same name above

const { invalidArg } = require('../validate');
// onend's reasons (end-reasons.js), re-exported as part of the contract.
const { END_REASONS } = require('./end-reasons');

const CAPABILITY_NAMES = Object.freeze(['descriptors', 'segments', 'handles', 'rings', 'requests', 'frames',
  'stagedWrites', 'jsDecode', 'segmentPool', 'readLimit', 'fd', 'written', 'retries']);
// The methods each capability brings.
const CAPABILITY_METHODS = Object.freeze({
  descriptors: [],
  segments: ['enableOutOfLine'],
  handles: ['acceptHandles'],
  rings: ['allowRings', 'enableRings'],
  requests: ['writeRequest', 'writeResponse'],
  frames: ['writeFrame'],
  stagedWrites: ['stageFrames', 'writeStaged'],
  jsDecode: ['decodeInJs'],
  segmentPool: ['acceptSegmentPool', 'enableSegmentPool', 'recycleSegments', 'takeDroppedSegments',
    'trimSegments', 'forgetSegments', 'segmentPoolStats'],
  readLimit: ['setMaxMessageSize'],
  fd: ['fd'],
  written: ['written'],
  retries: [],
});
const REQUIRED_METHODS = Object.freeze(['write', 'writeBuffer', 'flush', 'readStart', 'readStop', 'ref', 'unref',
  'close', 'stats']);
const NO_CAPABILITIES = Object.freeze(Object.fromEntries(CAPABILITY_NAMES.map((name) => [name, false])));

// capabilities(list) -> a frozen capability object with every name present.
function capabilities(declared) {
  const out = { ...NO_CAPABILITIES };
  for (const name of Object.keys(declared || {})) {
    if (!CAPABILITY_NAMES.includes(name)) throw new TypeError(`unknown backend capability: ${name}`);
    out[name] = Boolean(declared[name]);
  }
  return Object.freeze(out);
}

// Checks a handle where it is created (Channel's constructor): a backend
// missing part of the contract fails there with ERR_PROCWIRE_INVALID_ARG,
// never later with a TypeError deep inside Channel.
function checkHandle(handle, transport) {
  if (handle === null || typeof handle !== 'object') {
    throw invalidArg(`the ${transport} backend made no handle`);
  }
  for (const name of REQUIRED_METHODS) {
    if (typeof handle[name] !== 'function') {
      throw invalidArg(`the ${transport} backend's handle has no ${name}()`);
    }
  }
  const caps = handle.capabilities === undefined ? NO_CAPABILITIES : handle.capabilities;
  for (const name of CAPABILITY_NAMES) {
    if (typeof caps[name] !== 'boolean' && caps[name] !== undefined) {
      throw invalidArg(`the ${transport} backend declares capability ${name} as non-boolean`);
    }
  }
  for (const name of CAPABILITY_NAMES) {
    if (!caps[name]) continue;
    for (const method of CAPABILITY_METHODS[name]) {
      if (typeof handle[method] !== 'function') {
        throw invalidArg(`the ${transport} backend declares ${name} but lacks ${method}()`);
      }
    }
  }
  return capabilities(caps);
}

module.exports = { CAPABILITY_NAMES, CAPABILITY_METHODS, REQUIRED_METHODS, NO_CAPABILITIES, END_REASONS, capabilities, checkHandle };
