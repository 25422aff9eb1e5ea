'use strict';
// Node's handle conversion (lib/internal/child_process.js handleConversion)
// with public API only: which type a handle travels as, what is sent for
// it and how the sender lets go of it, and how the receiver rebuilds it from
// a descriptor (new net.Socket({ fd }), server.listen({ fd }),
// socket.bind({ fd })). Also the NODE_SOCKET_* bookkeeping of the
// connections a net.Server handed over.

// net and dgram are taken when a handle is sent or received, not at load:
// a native child's channel starts without them (Node's own child IPC loads
// both; a procwire child need not).
const EventEmitter = require('events');
const { nodeError } = require('../errors');
const { binding } = require('../native');

// The Node handle-conversion type a value travels as, or null. Raw handles
// (what net and cluster keep in `_handle`, e.g. a server's TCP handle) are
// recognised by their class name, as they are not reachable through public
// API otherwise.
function handleType(handle) {
  if (handle === null || typeof handle !== 'object') return null;
  const net = require('net');
  if (handle instanceof net.Socket) return 'net.Socket';
  if (handle instanceof net.Server) return 'net.Server';
  const name = handle && handle.constructor ? handle.constructor.name : '';
  if (name === 'TCP' || name === 'Pipe') return 'net.Native';
  if (handle instanceof require('dgram').Socket) return 'dgram.Socket';
  if (name === 'UDP') return 'dgram.Native';
  return null;
}

// The handle object that a dgram.Socket keeps in its state (under a symbol,
// since `socket._handle` is a deprecated accessor that would warn).
function dgramHandle(socket) {
  for (const symbol of Object.getOwnPropertySymbols(socket)) {
    const state = socket[symbol];
    if (state !== null && typeof state === 'object' && 'handle' in state && 'receiving' in state) return state.handle;
  }
  return null;
}

// A received handle nobody will get (the channel went away meanwhile).
function discardHandle(handle) {
  if (!handle) return;
  if (typeof handle.destroy === 'function') handle.destroy();
  else if (typeof handle.close === 'function') handle.close();
}

function descriptorOf(handle) {
  const fd = handle ? handle.fd : undefined;
  return typeof fd === 'number' && fd >= 0 ? fd : -1;
}

// Connections a net.Server handed to the peer, by the server's connection
// key: the server asks through it how many are still open
// (server.getConnections) and waits for them on close(), in Node's
// NODE_SOCKET_* messages, so either end may be plain Node.
class SentSockets extends EventEmitter {
  constructor(host, key, protocol) {
    super();
    this.key = key;
    this.host = host;
    this.protocol = protocol;
    if (typeof host.once === 'function' && host.pid !== undefined) host.once('exit', () => this.emit('exit', this));
  }

  _request(message, replyCmd, swallowErrors, callback) {
    const host = this.host;
    const onClose = () => {
      host.removeListener('internalMessage', onReply);
      callback(nodeError('ERR_CHILD_CLOSED_BEFORE_REPLY'));
    };
    const onReply = (reply) => {
      if (!(reply.cmd === replyCmd && reply.key === this.key)) return;
      host.removeListener('disconnect', onClose);
      host.removeListener('internalMessage', onReply);
      callback(null, reply);
    };
    if (!host.connected) {
      onClose();
      return;
    }
    this.protocol.resend(message, undefined, swallowErrors);
    host.once('disconnect', onClose);
    host.on('internalMessage', onReply);
  }

  close(callback) {
    this._request({ cmd: 'NODE_SOCKET_NOTIFY_CLOSE', key: this.key }, 'NODE_SOCKET_ALL_CLOSED', true, callback);
  }

  getConnections(callback) {
    this._request({ cmd: 'NODE_SOCKET_GET_COUNT', key: this.key }, 'NODE_SOCKET_COUNT', false,
      (err, reply) => (err ? callback(err) : callback(null, reply.count)));
  }
}

// The receiving side: counts the connections of one key still open here.
class ReceivedSockets extends EventEmitter {
  constructor(host, key, protocol) {
    super();
    this.connections = 0;
    this.key = key;
    this.host = host;
    this.protocol = protocol;
    const onEmpty = () => {
      if (host.connected) this.protocol.resend({ cmd: 'NODE_SOCKET_ALL_CLOSED', key: this.key }, undefined, true);
    };
    host.on('internalMessage', (message) => {
      if (message.key !== this.key) return;
      if (message.cmd === 'NODE_SOCKET_NOTIFY_CLOSE') {
        if (this.connections === 0) onEmpty();
        else this.once('empty', onEmpty);
      } else if (message.cmd === 'NODE_SOCKET_GET_COUNT' && host.connected) {
        this.protocol.resend({ cmd: 'NODE_SOCKET_COUNT', key: this.key, count: this.connections });
      }
    });
  }

  add(socket) {
    this.connections++;
    socket.once('close', () => {
      if (--this.connections === 0) this.emit('empty', this);
    });
  }
}

// An HTTP server's connection that goes to the peer takes its HTTP state
// with it: its parser goes back to Node's pool and its response lets go of
// it, as Node's own fork does (with _http_common, Node's module for this,
// public though undocumented), so neither keeps the socket alive here.
let httpCommon;
function releaseHttpState(socket) {
  const parser = socket.parser;
  if (parser === null || parser === undefined) return;
  if (httpCommon === undefined) {
    try {
      httpCommon = require('_http_common');
    } catch {
      httpCommon = null;
    }
  }
  if (httpCommon === null || typeof httpCommon.freeParser !== 'function' ||
      typeof httpCommon.HTTPParser !== 'function' || !(parser instanceof httpCommon.HTTPParser)) return;
  httpCommon.freeParser(parser, null, socket);
  if (socket._httpMessage) socket._httpMessage.detachSocket(socket);
}

// What is sent for each type: the descriptor, and how the sending side lets
// go of the handle once the peer took it. Returns null when there is nothing
// to send (a socket without a handle, a server not listening): the message
// then goes without a handle, as in Node.
function prepareSend(type, message, handle, options, protocol) {
  switch (type) {
    case 'net.Socket': {
      const raw = handle._handle;
      const fd = descriptorOf(raw);
      if (fd < 0) return null;
      const server = handle.server;
      if (server && typeof server._setupWorker === 'function') {
        // A connection of one of our servers: the server keeps counting it
        // through the peer (getConnections, close), as Node's does.
        message.key = server._connectionKey;
        const first = !protocol.sent.has(message.key);
        const list = protocol.socketList('sent', message.key);
        if (first) server._setupWorker(list);
      }
      if (!options.keepOpen) {
        // The peer owns the connection from now on. This end stops reading
        // at once, so bytes that arrive meanwhile stay in the kernel for the
        // peer (Node's own fork reads and drops them until the ACK). As in
        // Node, the socket object lets go of its handle now (it is not
        // destroyed and emits no 'close': the connection lives on in the
        // peer), its server stops counting it here (the peer counts it),
        // and the handle itself is closed when the peer acknowledges it.
        handle.pause();
        if (typeof raw.readStop === 'function' && raw.reading !== false) {
          raw.reading = false;
          raw.readStop();
        }
        handle._handle = null;
        handle.setTimeout(0);
        releaseHttpState(handle);
        if (server) server._connections--;
        return { fd, release: () => raw.close() };
      }
      return { fd, release: null };
    }
    case 'net.Server': {
      const fd = descriptorOf(handle._handle);
      return fd < 0 ? null : { fd, release: null };
    }
    case 'net.Native':
    case 'dgram.Native': {
      const fd = descriptorOf(handle);
      return fd < 0 ? null : { fd, release: null };
    }
    case 'dgram.Socket': {
      const fd = descriptorOf(dgramHandle(handle));
      if (fd < 0) return null;
      message.dgramType = handle.type;
      return { fd, release: null };
    }
    default:
      return null;
  }
}

// Builds the handle for a received descriptor and passes it to `done` (at
// once for sockets, once listening for servers and UDP sockets).
function receiveHandle(message, fd, done, protocol) {
  switch (message.type) {
    case 'net.Socket': {
      const socket = new (require('net').Socket)({ fd, readable: true, writable: true });
      // A connection of the sender's server: it may ask how many are open.
      if (message.key) protocol.socketList('received', message.key).add(socket);
      done(socket);
      return;
    }
    case 'net.Server': {
      const server = new (require('net').Server)();
      // exclusive: the descriptor is already listening; in a cluster worker
      // a non-exclusive listen would ask the primary for a server instead.
      server.listen({ fd, exclusive: true }, () => done(server));
      return;
    }
    case 'net.Native': {
      // Node hands over the bare handle here. net.Socket makes it (TCP or
      // Pipe, from the descriptor's type) without starting to read; this
      // end then takes the handle and leaves the socket object behind.
      const socket = new (require('net').Socket)({ fd, readable: false, writable: false });
      const raw = socket._handle;
      socket._handle = null;
      done(raw);
      return;
    }
    case 'dgram.Socket':
    case 'dgram.Native': {
      const type = message.dgramType === 'udp6' ? 'udp6' : 'udp4';
      const socket = require('dgram').createSocket(type);
      socket.bind({ fd, exclusive: true }, () => done(socket));
      return;
    }
    default:
      // Not a type Node sends: the descriptor is not ours to keep.
      binding.closeFd(fd);
  }
}

module.exports = { handleType, discardHandle, prepareSend, receiveHandle, SentSockets, ReceivedSockets };
