'use strict';
// The keys a backend's server uses to reach the parts of a listener another
// module defines (as undici's lib/core/symbols.js): ServerBase's admission
// and lifecycle (server.js), which every backend's server extends, and the
// unix/TCP server state socket.js sets up, which the fallback and TLS
// servers share. Nothing in lib/transport/ reads another module's
// underscore field; tests that need a listener's internals use these.

module.exports = {
  // ServerBase: true once close() was called.
  kClosed: Symbol('procwire.server.closed'),
  // ServerBase: the hello's secret (null: none), its time limit, and the
  // call that sets both up from the options.
  kSecret: Symbol('procwire.server.secret'),
  kHelloTimeout: Symbol('procwire.server.helloTimeout'),
  kSetupHello: Symbol('procwire.server.setupHello'),
  // ServerBase: a new channel runs the hello (admit), then is handed to the
  // user (accept); errors nobody listens for become warnings (report).
  kAdmit: Symbol('procwire.server.admit'),
  kAccept: Symbol('procwire.server.accept'),
  kReport: Symbol('procwire.server.report'),
  // What a backend's server supplies: start listening (kListen(host) for
  // sockets, kStart() for NATS), release the listening resource (kStop),
  // and ref or unref it (kRefListener(on)).
  kListen: Symbol('procwire.server.listen'),
  kStart: Symbol('procwire.server.start'),
  kStop: Symbol('procwire.server.stop'),
  kRefListener: Symbol('procwire.server.refListener'),
  // The listening resource itself (the addon's listener, a net.Server or a
  // tls.Server), or null before it is bound.
  kListener: Symbol('procwire.server.listener'),
  // A unix/TCP server's state (socket.js initSocketServer): the resolved
  // address and options, the bound host and port, the socket and key files
  // it made (with their identities, so close() removes only its own), and
  // the uids a unix peer may have.
  kAddress: Symbol('procwire.server.address'),
  kOptions: Symbol('procwire.server.options'),
  kHost: Symbol('procwire.server.host'),
  kBoundPort: Symbol('procwire.server.boundPort'),
  kKeyFile: Symbol('procwire.server.keyFile'),
  kKeyIno: Symbol('procwire.server.keyIno'),
  kSocketIno: Symbol('procwire.server.socketIno'),
  kAllowedUids: Symbol('procwire.server.allowedUids'),
};
