'use strict';
// RingNegotiation: whether and when a Channel's shared-memory rings start.
// Both ends offer them in their capabilities; they start once both did
// and, on a channel that runs the authenticated hello, once the hello is
// done (docs/protocol.md, "Control frame: ring set-up").

const { debug } = require('../debug');
const { RINGS_VERSION } = require('../protocol');
const { kPhase, kReader, kWriter } = require('./symbols');

class RingNegotiation {
  // offered: this end offers rings (a procwire end on a unix socket this
  // process reads natively). helloRole: 'client', 'server' or null.
  constructor(host, handle, offered, helloRole) {
    this.host = host;
    this.handle = handle;
    this.offered = offered;
    this.started = false;
    this.pending = false;
    // A channel that runs the authenticated hello (options.hello: this end's
    // role) accepts a ring from the peer only once the hello is done, so
    // nothing is mapped for a peer that has not proved itself; the server
    // then sets up its own ring only in answer to the client's. Any other
    // channel accepts one from the start: the peer's set-up may arrive in
    // the same read as its capabilities.
    this.helloRole = helloRole;
    this.helloDone = false;
    if (offered && helloRole === null) handle.allowRings();
  }

  mayStart() {
    return this.host[kReader].gate === null && (this.helloRole === null || this.helloDone);
  }

  // Starts what was pending if it may start now.
  maybeStart() {
    if (this.pending && this.mayStart()) this.start();
  }

  // The peer offered rings too.
  onCapabilities(message) {
    if (message.rings === RINGS_VERSION && this.offered && !this.started) {
      if (this.mayStart()) this.start(); else this.pending = true;
    }
  }

  // Called (through the channel) by lib/security/handshake.js once the hello succeeded.
  onHelloDone() {
    debug('channel %s hello done (%s)', this.host.transport, this.helloRole);
    this.helloDone = true;
    this.maybeStart();
  }

  start() {
    this.pending = false;
    const phase = this.host[kPhase];
    if (this.started || (phase !== 'open' && phase !== 'connecting')) return;
    debug('channel %s rings starting (%s side)', this.host.transport, this.helloRole || 'fork');
    this.started = true;
    if (this.helloRole === 'server') {
      // The client sets up its ring first, once its own hello is done; the
      // addon answers with ours as soon as it has mapped the client's.
      this.handle.allowRings(true);
      return;
    }
    if (this.helloRole === 'client') this.handle.allowRings();
    this.host[kWriter].sendRingSetup();
  }
}

module.exports = { RingNegotiation };
