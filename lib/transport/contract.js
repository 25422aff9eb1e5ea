'use strict';
// The contract between Channel (lib/channel.js, the policy: backpressure,
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
// Handle methods (optional):
//   setMaxMessageSize(n) -> false when a frame already buffered is over n
//   written()        -> total bytes written so far, without writing: a
//                       channel closed abruptly settles the callbacks of
//                       what was already written as sent
//   fd()             -> the socket's descriptor, when there is one
//   enableOutOfLine(), acceptHandles()  with the capabilities below
//   writeFrame(bytes, length) -> total bytes queued; an advanced frame the
//                       JavaScript encoder wrote (lib/codec/advanced-fast.js)
//   stageFrames(buffer), writeStaged(length) -> total bytes queued: frames
//                       encoded back to back into `buffer` (the channel's
//                       for its whole life), handed over in one call per
//                       batch; throws ERR_PROCWIRE_OUT_OF_MEMORY only
//   decodeInJs(bytes, frames)  small advanced frames are left for
//                       JavaScript to decode (see onread)
//   writeRequest(id, body), writeResponse(id, ok, bodyOrError)
//                       with capability `requests`: the transport carries
//                       request/reply natively (NATS request subjects), so
//                       Channel hands it ids and bodies instead of its own
//                       NODE_PROCWIRE_REQ/RES messages
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
//   onerror(err)              a non-fatal transport error, for 'error'
//   onfail(err)               a fatal transport error: Channel closes with it
//
// Capabilities (handle.capabilities, a frozen object; absent means none):
//   descriptors  descriptors can ride on frames (unix sockets)
//   segments     shared-memory segments can be sent out of line
//   handles      Node's NODE_HANDLE protocol (net.Socket, net.Server, ...)
//   rings        shared-memory rings (set up by the ring integration)
//   requests     native request/reply (writeRequest/writeResponse)

const { invalidArg } = require('../validate');
// onend's reasons (end-reasons.js), re-exported as part of the contract.
const { END_REASONS } = require('./end-reasons');

const CAPABILITY_NAMES = Object.freeze(['descriptors', 'segments', 'handles', 'rings', 'requests']);
const REQUIRED_METHODS = Object.freeze(['write', 'writeBuffer', 'flush', 'readStart', 'readStop', 'ref', 'unref',
  'close', 'stats']);
const NO_CAPABILITIES = Object.freeze({
  descriptors: false, segments: false, handles: false, rings: false, requests: false,
});

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
  if (caps.requests && (typeof handle.writeRequest !== 'function' || typeof handle.writeResponse !== 'function')) {
    throw invalidArg(`the ${transport} backend declares requests but lacks writeRequest()/writeResponse()`);
  }
  return caps;
}

module.exports = { CAPABILITY_NAMES, REQUIRED_METHODS, NO_CAPABILITIES, END_REASONS, capabilities, checkHandle };
