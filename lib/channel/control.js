'use strict';
// The control table: what a Channel does with each internal message (an
// object whose `cmd` starts with NODE_, lib/protocol.js). procwire's own
// commands go to their collaborator; NODE_HANDLE and its answers go to the
// handle protocol when the channel takes handles, and a plain Node peer's
// handle is refused otherwise; anything else is 'internalMessage', as Node
// routes it.

const { binding } = require('../native');
const { makeError } = require('../errors');
const { CMD } = require('../protocol');
const { debug } = require('../debug');
const {
  kPhase, kWriter, kRequests, kResponder, kSegments, kRings, kFinish, kEmitError,
} = require('./symbols');

// The peer broke procwire's control protocol: the channel cannot be
// trusted any more and is closed.
function protocolError(host, message) {
  host[kFinish]('protocol-error', makeError('ERR_PROCWIRE_PROTOCOL', message));
}

const TABLE = {
  __proto__: null,
  [CMD.REQUEST]: (host, message) => host[kResponder].onRequest(message),
  [CMD.RESPONSE]: (host, message) =>
    host[kRequests].onResponse(message.id, message.ok, message.ok ? message.body : message.error),
  [CMD.CAPABILITIES]: (host, message) => {
    if (debug.enabled) {
      debug('channel %s capabilities from peer: segments %s, pool %s, rings %s (ours: segments %s, rings %s)',
        host.transport, message.segments, message.pool, message.rings, host[kSegments].canTake, host[kRings].offered);
    }
    host[kSegments].onCapabilities(message);
    // Rings start once both ends offered them and, on channels that run
    // the hello, the hello is done (until then the gate holds every
    // message).
    host[kRings].onCapabilities(message);
  },
  [CMD.SEGMENT_ACK]: (host, message) => {
    if (!host[kSegments].onAck(message)) {
      protocolError(host, `invalid segment acknowledgement (n: ${String(message.n)}, bytes: ${String(message.bytes)})`);
    }
  },
  [CMD.SEGMENT_RETURN]: (host, message) => {
    if (host[kPhase] === 'closed') return;
    if (!host[kSegments].onReturned(message.ids)) protocolError(host, 'invalid recycled segment return');
  },
  [CMD.SEGMENT_DROP]: (host, message) => host[kSegments].onDropped(message.ids),
  // A plain Node peer passed a handle (this channel takes none). The
  // descriptor was closed on arrival; refuse in Node's own protocol so the
  // sender does not wait forever, and say so here.
  [CMD.HANDLE]: (host) => {
    host[kWriter].sendControl({ cmd: CMD.HANDLE_NACK });
    host[kEmitError](makeError('ERR_PROCWIRE_HANDLE_UNSUPPORTED',
      `the peer sent a handle; a ${host.transport} channel cannot take handles`));
  },
};

class Control {
  constructor(host) {
    this.host = host;
    // (message, fd): the handle protocol's, for NODE_HANDLE and its answers
    // (lib/child-process/handle-protocol.js sets it), or null.
    this.handleHook = null;
  }

  onMessage(message, fd) {
    const cmd = message.cmd;
    if (this.handleHook !== null && (cmd === CMD.HANDLE || cmd === CMD.HANDLE_ACK || cmd === CMD.HANDLE_NACK)) {
      this.handleHook(message, fd);
      return;
    }
    if (fd !== undefined) binding.closeFd(fd);
    const handler = TABLE[cmd];
    if (handler !== undefined) handler(this.host, message);
    else this.host.emit('internalMessage', message);
  }
}

module.exports = { Control };
