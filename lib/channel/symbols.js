'use strict';
// The keys other modules use to reach a Channel's internals (as undici's
// lib/core/symbols.js): its collaborators and the few calls they make back
// into it. Nothing outside lib/channel/ reads an underscore field of a
// Channel; lib/child-process/, lib/security/ and tests that need more
// than the public API go through these.

module.exports = {
  // The backend handle (lib/transport/contract.js) and its capabilities.
  kHandle: Symbol('procwire.handle'),
  kCaps: Symbol('procwire.capabilities'),
  // 'connecting' | 'open' | 'closing' | 'closed'.
  kPhase: Symbol('procwire.phase'),
  // The collaborators, one each per channel, made in its constructor.
  kWriter: Symbol('procwire.writer'),
  kReader: Symbol('procwire.reader'),
  kInbox: Symbol('procwire.inbox'),
  kRequests: Symbol('procwire.requests'),
  kResponder: Symbol('procwire.responder'),
  kSegments: Symbol('procwire.segments'),
  kRings: Symbol('procwire.rings'),
  kControl: Symbol('procwire.control'),
  // The handle protocol (lib/child-process/handle-protocol.js) when the channel takes handles.
  kHandles: Symbol('procwire.handles'),
  // Calls back into the Channel.
  kFinish: Symbol('procwire.finish'),
  kEmitError: Symbol('procwire.emitError'),
  kApplyRefPolicy: Symbol('procwire.applyRefPolicy'),
  kSendNow: Symbol('procwire.sendNow'),
  kSendPlain: Symbol('procwire.sendPlain'),
  kSetReadLimit: Symbol('procwire.setReadLimit'),
  kHelloDone: Symbol('procwire.helloDone'),
};
