'use strict';
// The TLS backend: TCP with node:tls doing the encryption. The channel runs
// over the TLS socket through StreamHandle (./stream.js), with the same
// Channel, framing and codec as every other backend; the listener is the
// native socket backend's Server (same hello admission and limits) with a
// tls.Server in place of the native listener.

const net = require('net');
const tls = require('tls');
const { Channel } = require('../channel');
const { makeError } = require('../errors');
const { invalidArg } = require('../validate');
const { binding } = require('../native');
const { FORMATS } = require('../codec/formats');
const { refuseSeparated } = require('../codec/separate');
const { StreamHandle } = require('./stream');
const {
  Server, resolveAddress, channelOptions, numericHost, authenticateClient, clientSettings,
} = require('./socket');
const { listenArguments, setReady } = require('./server');
const {
  kAddress, kAdmit, kBoundPort, kClosed, kHelloTimeout, kHost, kListen, kListener, kOptions,
} = require('./symbols');

// The TLS socket through StreamHandle, with the loaded binding's codec and
// framer (the addon's, or the fallback's): the same bytes on the wire.
function tlsHandle(socket, callbacks, options) {
  return new StreamHandle(socket, callbacks, {
    ...options,
    // The addon's advanced encoder is V8's serializer (../codec/separate.js).
    encode: (format, value) => {
      if (format === FORMATS.advanced.id) refuseSeparated(value);
      return binding.encode(format, value);
    },
    createFramer: (format, max) => new binding.NativeFramer(format, max),
  });
}

class TlsServer extends Server {
  // TCP with TLS: node:tls does the encryption, so the channel runs over the
  // TLS socket through StreamHandle (same Channel, same framing and codec).
  [kListen](host) {
    return new Promise((resolve, reject) => {
      // A connection that never completes its TLS handshake is cut off
      // after helloTimeout (Node's own default is 120 s).
      const handshakeTimeout = this[kHelloTimeout] > 0 ? this[kHelloTimeout] : undefined;
      const srv = tls.createServer({ handshakeTimeout, ...this[kOptions].tls }, (socket) => this.#onTlsSocket(socket));
      srv.on('tlsClientError', (err, socket) => {
        if (socket) socket.destroy();
        this.emit('reject', makeError('ERR_PROCWIRE_AUTH_FAILED', `TLS handshake failed: ${err.message}`, err));
      });
      srv.once('error', reject);
      srv.listen(this[kAddress].port, host, this[kOptions].backlog || 511, () => {
        srv.off('error', reject);
        srv.on('error', (err) => { if (this.listenerCount('error') > 0) this.emit('error', err); });
        this[kListener] = srv;
        this[kBoundPort] = srv.address().port;
        this[kHost] = host;
        resolve();
      });
    });
  }

  #onTlsSocket(socket) {
    if (this[kClosed]) {
      socket.destroy();
      return;
    }
    socket.setNoDelay(true);
    const peer = { address: socket.remoteAddress, port: socket.remotePort, authorized: socket.authorized };
    this[kAdmit](new Channel(null, {
      ...channelOptions(this[kOptions], this[kAddress]), transport: 'tls', peer,
      createHandle: (callbacks, o) => tlsHandle(socket, callbacks, o),
    }));
  }
}

function listen(target, options, onChannel) {
  ({ options, onChannel } = listenArguments(options, onChannel));
  const address = resolveAddress(target);
  if (address.kind !== 'tcp' || options.tls === null || typeof options.tls !== 'object') {
    throw invalidArg('options.tls (an object of node:tls options) applies to TCP addresses only');
  }
  const server = new TlsServer(address, options);
  if (onChannel !== undefined) server.on('channel', onChannel);
  numericHost(address.host).then((host) => server[kClosed] ? undefined : server[kListen](host))
    .then(() => { if (!server[kClosed]) process.nextTick(() => server.emit('listening')); })
    .catch((err) => server.emit('error', makeError('ERR_PROCWIRE_LISTEN_FAILED', err.message, err)));
  return setReady(server);
}

async function connect(target, options) {
  let address, secret, helloTimeout;
  ({ options, address, secret, helloTimeout } = clientSettings(target, options));
  const host = address.host;
  const started = Date.now();
  const socket = tls.connect({
    host, port: address.port, servername: net.isIP(host) ? undefined : host, ...options.tls,
  });
  await new Promise((resolve, reject) => {
    // helloTimeout runs from the connect to the end of the hello, so a
    // server that never answers the ClientHello cannot hold us forever.
    const timer = helloTimeout > 0 ? setTimeout(() => {
      socket.destroy();
      reject(makeError('ERR_PROCWIRE_HELLO_TIMEOUT',
        `TLS handshake with ${host}:${address.port} did not complete within ${helloTimeout} ms`));
    }, helloTimeout) : null;
    socket.once('secureConnect', () => {
      if (timer !== null) clearTimeout(timer);
      resolve();
    });
    socket.once('error', (err) => {
      socket.destroy();
      // A certificate the client does not trust is an authentication failure.
      const code = err.code && /CERT|SELF_SIGNED|HOSTNAME|ALTNAME|UNABLE_TO_VERIFY/.test(err.code)
        ? 'ERR_PROCWIRE_AUTH_FAILED' : 'ERR_PROCWIRE_CONNECT_FAILED';
      if (timer !== null) clearTimeout(timer);
      reject(makeError(code, `TLS connect to ${host}:${address.port} failed: ${err.message}`, err));
    });
  });
  socket.setNoDelay(true);
  const channel = new Channel(null, {
    ...channelOptions(options, address), transport: 'tls',
    peer: { address: socket.remoteAddress, port: socket.remotePort, authorized: socket.authorized },
    createHandle: (callbacks, o) => tlsHandle(socket, callbacks, o),
  });
  const left = helloTimeout > 0 ? Math.max(1, helloTimeout - (Date.now() - started)) : 0;
  await authenticateClient(channel, secret, address, left);
  return channel;
}


module.exports = { listen, connect, TlsServer };
