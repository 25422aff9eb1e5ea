'use strict';
// Node's child_process IPC semantics over a procwire Channel.
//
// Two pieces:
//   HandleProtocol: passing handles (sockets, servers, UDP sockets) the way
//     Node's own IPC does, so either end may be plain Node: the message is
//     wrapped as { cmd: 'NODE_HANDLE', type, msg }, the descriptor rides
//     beside that frame (SCM_RIGHTS), the receiver answers NODE_HANDLE_ACK
//     (or NODE_HANDLE_NACK when no descriptor came, and the sender tries
//     again, up to 3 times), and everything sent while a handle waits for
//     its answer is queued behind it so the order holds.
//   setupChildProcess: the ChildProcess surface of fork() (send, _send,
//     connected, disconnect, _disconnect, channel, _channel, _handleQueue,
//     _pendingMessage, 'message', 'internalMessage', 'disconnect'), with
//     Node's events, timing, codes and messages.
// Handles are rebuilt from received descriptors with public API only
// (new net.Socket({ fd }), server.listen({ fd }), socket.bind({ fd })).

const net = require('net');
const dgram = require('dgram');
const EventEmitter = require('events');
const util = require('util');
const v8 = require('v8');
const { nodeError, makeError } = require('./errors');
const { binding } = require('./native');
const { kWriteFailed, writeErrnoException } = require('./write-failure');

// Node retransmits a handle this many times after a NODE_HANDLE_NACK.
const MAX_HANDLE_RETRANSMISSIONS = 3;

function isInternal(message) {
  return message !== null && typeof message === 'object' && typeof message.cmd === 'string' &&
    message.cmd.length > 5 && message.cmd.startsWith('NODE_');
}

function isHandleAnswer(message) {
  return message !== null && typeof message === 'object' &&
    (message.cmd === 'NODE_HANDLE_ACK' || message.cmd === 'NODE_HANDLE_NACK');
}

// The Node handle-conversion type a value travels as, or null. Raw handles
// (what net and cluster keep in `_handle`, e.g. a server's TCP handle) are
// recognised by their class name, as they are not reachable through public
// API otherwise.
function handleType(handle) {
  if (handle instanceof net.Socket) return 'net.Socket';
  if (handle instanceof net.Server) return 'net.Server';
  const name = handle && handle.constructor ? handle.constructor.name : '';
  if (name === 'TCP' || name === 'Pipe') return 'net.Native';
  if (handle instanceof dgram.Socket) return 'dgram.Socket';
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
  constructor(host, key) {
    super();
    this.key = key;
    this.host = host;
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
    host._send(message, undefined, swallowErrors);
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
  constructor(host, key) {
    super();
    this.connections = 0;
    this.key = key;
    this.host = host;
    const onEmpty = () => {
      if (host.connected) host._send({ cmd: 'NODE_SOCKET_ALL_CLOSED', key: this.key }, undefined, true);
    };
    host.on('internalMessage', (message) => {
      if (message.key !== this.key) return;
      if (message.cmd === 'NODE_SOCKET_NOTIFY_CLOSE') {
        if (this.connections === 0) onEmpty();
        else this.once('empty', onEmpty);
      } else if (message.cmd === 'NODE_SOCKET_GET_COUNT' && host.connected) {
        host._send({ cmd: 'NODE_SOCKET_COUNT', key: this.key, count: this.connections });
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
      const socket = new net.Socket({ fd, readable: true, writable: true });
      // A connection of the sender's server: it may ask how many are open.
      if (message.key) protocol.socketList('received', message.key).add(socket);
      done(socket);
      return;
    }
    case 'net.Server': {
      const server = new net.Server();
      // exclusive: the descriptor is already listening; in a cluster worker
      // a non-exclusive listen would ask the primary for a server instead.
      server.listen({ fd, exclusive: true }, () => done(server));
      return;
    }
    case 'net.Native': {
      // Node hands over the bare handle here. net.Socket makes it (TCP or
      // Pipe, from the descriptor's type) without starting to read; this
      // end then takes the handle and leaves the socket object behind.
      const socket = new net.Socket({ fd, readable: false, writable: false });
      const raw = socket._handle;
      socket._handle = null;
      done(raw);
      return;
    }
    case 'dgram.Socket':
    case 'dgram.Native': {
      const type = message.dgramType === 'udp6' ? 'udp6' : 'udp4';
      const socket = dgram.createSocket(type);
      socket.bind({ fd, exclusive: true }, () => done(socket));
      return;
    }
    default:
      // Not a type Node sends: the descriptor is not ours to keep.
      binding.closeFd(fd);
  }
}

// Handle passing for one channel. `host` is the object users call (the
// ChildProcess, or the Channel itself): it holds _handleQueue and
// _pendingMessage as Node's ChildProcess does, and `deliver(message, handle,
// internal)` emits what arrives.
class HandleProtocol {
  constructor(channel, host, deliver) {
    this.channel = channel;
    this.host = host;
    this.deliver = deliver;
    host._handleQueue = null;
    host._pendingMessage = null;
    this.sent = new Map();
    this.received = new Map();
    channel._handleHook = (message, fd) => this._onControl(message, fd);
  }

  socketList(kind, key) {
    const lists = this[kind];
    let list = lists.get(key);
    if (list === undefined) {
      list = kind === 'sent' ? new SentSockets(this.host, key) : new ReceivedSockets(this.host, key);
      lists.set(key, list);
    }
    return list;
  }

  // Node's _send: message and handle already checked by the caller.
  // writeNow(message, options, callback) -> boolean writes a plain message.
  send(message, handle, options, callback, writeNow) {
    const host = this.host;
    if (handle) {
      const type = handleType(handle);
      if (type === null) throw nodeError('ERR_INVALID_HANDLE_TYPE');
      if (!this.channel._takesHandles) {
        throw makeError('ERR_PROCWIRE_HANDLE_UNSUPPORTED',
          `a ${this.channel.transport} channel cannot pass handles; only unix sockets (fork, named channels) can`);
      }
      if (host._handleQueue) {
        host._handleQueue.push({ callback, handle, options, message });
        return host._handleQueue.length === 1;
      }
      const wrapper = { cmd: 'NODE_HANDLE', type, msg: message };
      const prepared = prepareSend(type, wrapper, handle, options, this);
      if (prepared === null) return writeNow(message, options, callback);
      return this._writeHandle(wrapper, handle, prepared, options, callback, 0);
    }
    if (host._handleQueue && !isHandleAnswer(message)) {
      // Behind an unacknowledged handle: queued so the order holds.
      host._handleQueue.push({ callback, handle: null, options, message });
      return host._handleQueue.length === 1;
    }
    return writeNow(message, options, callback);
  }

  _writeHandle(wrapper, handle, prepared, options, callback, retransmissions) {
    const host = this.host;
    if (!this.channel.connected) {
      // Nothing will carry the handle or acknowledge it: it is let go of now
      // (a socket's handle, already taken from it, is closed), as Node
      // closes a handle whose write failed; the callback gets the error.
      const refused = this.channel._sendWithDescriptor(wrapper, prepared.fd, callback);
      if (prepared.release) prepared.release();
      return refused;
    }
    const ok = this.channel._sendWithDescriptor(wrapper, prepared.fd, callback);
    if (this.channel.closed) {
      // A getter of the message closed the channel while it was encoded.
      if (prepared.release) prepared.release();
      return ok;
    }
    host._handleQueue = host._handleQueue || [];
    host._pendingMessage = { callback: undefined, message: wrapper, handle, options, retransmissions, prepared };
    return ok;
  }

  // The peer answered the handle in flight, or sent one.
  _onControl(message, fd) {
    const host = this.host;
    if (message.cmd === 'NODE_HANDLE') {
      if (fd === undefined) {
        // The message came without its descriptor (for example it was cut
        // off as MSG_CTRUNC): tell the sender, which tries again.
        this._answer('NODE_HANDLE_NACK');
        return;
      }
      if (this.channel.closed) {
        binding.closeFd(fd);
        return;
      }
      this._answer('NODE_HANDLE_ACK');
      receiveHandle(message, fd, (handle) => this.deliver(message.msg, handle, isInternal(message.msg)), this);
      return;
    }
    // NODE_HANDLE_ACK or NODE_HANDLE_NACK.
    const pending = host._pendingMessage;
    let resend = null;
    if (pending) {
      if (message.cmd === 'NODE_HANDLE_ACK') {
        this._release();
      } else if (pending.retransmissions >= MAX_HANDLE_RETRANSMISSIONS) {
        this._release();
        process.emitWarning('Handle did not reach the receiving process correctly', 'SentHandleNotReceivedWarning');
      } else {
        resend = pending;
        host._pendingMessage = null;
      }
    }
    const queue = host._handleQueue || [];
    host._handleQueue = null;
    if (resend !== null) {
      this._writeHandle(resend.message, resend.handle, resend.prepared, resend.options, undefined,
        resend.retransmissions + 1);
    }
    for (const item of queue) host._send(item.message, item.handle, item.options, item.callback);
    if (typeof host._afterQueue === 'function') host._afterQueue();
  }

  _answer(cmd) {
    // Not initiated by the user: failing to answer is not their error.
    if (this.channel.connected) this.channel._sendAnswer({ cmd });
  }

  // Lets go of the handle in flight (it reached the peer, or never will).
  _release() {
    const pending = this.host._pendingMessage;
    this.host._pendingMessage = null;
    if (pending && pending.prepared.release) pending.prepared.release();
  }
}

// Node's checks on send(message, handle, options, callback), shared by the
// ChildProcess and Channel surfaces. Returns the normalised arguments.
// The options of send(message) without any: Node's defaults, shared and
// frozen (nothing downstream writes to options).
const DEFAULT_SEND_OPTIONS = Object.freeze({ swallowErrors: false });
// Entries (three per message) the surface's inbox keeps its capacity for
// between batches.
const INBOX_KEEP = 3 * 1024;

function normalizeSendArgs(handle, options, callback) {
  if (typeof handle === 'function') {
    callback = handle;
    handle = undefined;
    options = undefined;
  } else if (typeof options === 'function') {
    callback = options;
    options = undefined;
  } else if (options !== undefined && (options === null || typeof options !== 'object')) {
    throw nodeError('ERR_INVALID_ARG_TYPE', 'options', 'of type object', options);
  }
  return [handle, { swallowErrors: false, ...options }, callback];
}

function checkMessage(message) {
  if (message === undefined) throw nodeError('ERR_MISSING_ARGS', 'message');
  const type = typeof message;
  if (type !== 'string' && type !== 'object' && type !== 'number' && type !== 'boolean') {
    throw nodeError('ERR_INVALID_ARG_TYPE', 'message', 'one of type string, object, number, or boolean', message);
  }
}

// On the child_process surface a closed channel is Node's
// ERR_IPC_CHANNEL_CLOSED, not procwire's code.
const kNodeFacing = Symbol('nodeFacing');
function nodeFacing(err) {
  return err && err.code === 'ERR_PROCWIRE_CHANNEL_CLOSED' ? nodeError('ERR_IPC_CHANNEL_CLOSED') : err;
}

// Node's send() throws its serializer's own error for a value it cannot
// send: JSON.stringify's TypeError in json mode (a BigInt, a cycle), V8's
// DataCloneError in advanced mode (a function, a symbol). procwire's codec
// reports ERR_PROCWIRE_UNSERIALIZABLE instead; on this cold path the Node-facing
// surface runs the serializer Node would have run, so the thrown error is
// Node's exactly. A value Node's serializer takes keeps procwire's error.
function nodeSerializationError(err, message, serialization) {
  try {
    if (serialization === 'json') {
      JSON.stringify(message);
    } else {
      const serializer = new v8.Serializer();
      serializer.writeHeader();
      serializer.writeValue(message);
    }
  } catch (nodeErr) {
    return nodeErr;
  }
  return err;
}

// Gives `child` (a ChildProcess spawned without Node's channel) Node's IPC
// surface on top of `channel`, with procwire's extras (request, respond).
// With { childSide: true } the same surface goes on `process` in a child
// (see lib/child-preload.js), as Node's own child side: the channel keeps
// the process alive only while 'message' or 'disconnect' listeners exist,
// unless process.channel.ref()/unref() said otherwise.
function setupChildProcess(child, channel, { legacyChannelAlias, childSide = false }) {
  child.channel = channel;
  if (legacyChannelAlias) {
    // Node 20-24 keep `_channel` as an alias, deprecated (DEP0129) with the
    // same warning.
    const message = '_channel is deprecated. Use ChildProcess.channel instead.';
    Object.defineProperty(child, '_channel', {
      get: util.deprecate(() => child.channel, message, 'DEP0129'),
      set: util.deprecate((value) => { child.channel = value; }, message, 'DEP0129'),
      configurable: true,
      enumerable: false,
    });
  }
  if (!childSide) {
    // The channel counts towards 'close' as Node's IPC pipe does.
    child._closesNeeded = (child._closesNeeded || 1) + 1;
    child._closesGot = child._closesGot || 0;
    // Node writes each message within send(); here a tick's later messages
    // wait for its flush. So that a signal never overtakes what was sent
    // before it (send(); kill('SIGKILL') reports the message sent, as in
    // Node), kill() writes them out first.
    // The method is looked up at each call, so a kill replaced on the
    // prototype later (a test's stub) is still the one that runs.
    const proto = Object.getPrototypeOf(child);
    if (typeof proto.kill === 'function') {
      child.kill = function kill(signal) {
        channel._writeOutNow();
        return Reflect.apply(proto.kill, this, arguments);
      };
    }
  } else {
    let refs = 0;
    let explicit = false;
    const ref = channel.ref;
    const unref = channel.unref;
    channel.ref = function explicitRef() { explicit = true; return ref.call(channel); };
    channel.unref = function explicitUnref() { explicit = true; return unref.call(channel); };
    unref.call(channel);
    child.on('newListener', (name) => {
      if ((name === 'message' || name === 'disconnect') && ++refs === 1 && !explicit) ref.call(channel);
    });
    child.on('removeListener', (name) => {
      if ((name === 'message' || name === 'disconnect') && --refs === 0 && !explicit) unref.call(channel);
    });
  }
  child.connected = true;

  const pendingMessages = [];
  // Whether 'message' has listeners, asked once per batch and again after
  // a listener came (`child` may be `process`, whose properties V8 keeps in
  // a dictionary: asking per message measured several percent of a small
  // message's cost). A listener that went is seen by emit() itself, which
  // returns false when it found none: that message is kept, as Node keeps
  // it when it asks before emitting.
  let messageListened = null;  // null: ask
  // Whether the channel hands its user messages to this surface (`consume`)
  // or keeps them in its bounded backlog (no 'message' listener here).
  let consumerAttached = true;
  // A message the channel's own 'message' listeners take (a driver on
  // child.channel) has been delivered: it is not also kept for a 'message'
  // listener the child may get later. Kept, every message of such a channel
  // stayed in pendingMessages for good, and collecting that growing heap
  // made the channel run at a third of a named channel's speed.
  const consume = (message, handle) => {
    if (handle === undefined && child.listenerCount('message') === 0 && channel.listenerCount('message') > 0) return;
    deliver(message, handle, false);
  };
  const emitNow = (event, message, handle) => {
    if (event === 'internalMessage') {
      child.emit(event, message, handle);
      return;
    }
    if (messageListened === null) messageListened = child.listenerCount('message') > 0;
    if (messageListened && child.emit(event, message, handle) !== false) return;
    messageListened = false;
    pendingMessages.push([event, message, handle]);
    // Until a listener comes, the channel keeps what it reads next in its
    // own backlog, which stops reading at its bound (10,000 messages or
    // 64 MiB) and drops nothing; here waits at most what was read before.
    if (consumerAttached) {
      consumerAttached = false;
      channel._setConsumer(null);
    }
  };
  // Like Node: a message is emitted on a later tick than the read that
  // brought it, in order, and kept until a 'message' listener exists;
  // nothing is emitted once disconnected. Node queues one tick per message;
  // here one tick emits everything delivered before it runs, which keeps
  // the same order (in both, what a handler queues with nextTick or a
  // promise runs after the messages already read) at a fraction of the
  // cost. `inbox` holds [event, message, handle] triples, flattened.
  // inbox[0, inboxEnd) is in use; the array keeps its capacity between
  // batches (cleared, not shortened), so a batch does not grow it again.
  const inbox = [];
  let inboxNext = 0;
  let inboxEnd = 0;
  const emitInbox = () => {
    messageListened = null;
    try {
      while (inboxNext < inboxEnd) {
        const i = inboxNext;
        inboxNext += 3;
        const event = inbox[i];
        const message = inbox[i + 1];
        const handle = inbox[i + 2];
        inbox[i + 1] = undefined;
        inbox[i + 2] = undefined;
        emitNow(event, message, handle);
      }
    } finally {
      // A handler that threw leaves the rest to a later tick, as Node's
      // tick queue keeps the messages queued behind the one that threw.
      if (inboxNext < inboxEnd) {
        process.nextTick(emitInbox);
      } else {
        inboxEnd = 0;
        inboxNext = 0;
        // A burst far larger than usual does not pin its memory.
        if (inbox.length > INBOX_KEEP) inbox.length = 0;
      }
    }
  };
  const deliver = (message, handle, internal) => {
    if (!child.channel) {
      discardHandle(handle);
      return;
    }
    if (inboxEnd === 0) process.nextTick(emitInbox);
    inbox[inboxEnd] = internal ? 'internalMessage' : 'message';
    inbox[inboxEnd + 1] = message;
    inbox[inboxEnd + 2] = handle;
    inboxEnd += 3;
  };
  child.on('newListener', () => {
    messageListened = null;
    process.nextTick(() => {
      if (!child.channel || child.listenerCount('message') === 0) return;
      const list = pendingMessages.splice(0);
      for (const args of list) child.emit(...args);
      // Then the channel's backlog, behind them (drained on a later tick).
      if (!consumerAttached && pendingMessages.length === 0 && child.listenerCount('message') > 0) {
        consumerAttached = true;
        channel._setConsumer(consume);
      }
    });
  });

  // A message with a handle queues behind the channel's backlog while that
  // holds messages, so it never overtakes the ones read before it.
  const deliverHandled = (message, handle, internal) => {
    if (!internal && child.channel && (!consumerAttached || channel._backlog.length > 0)) {
      channel._deliverWithHandle(message, handle, false);
    } else {
      deliver(message, handle, internal);
    }
  };
  const protocol = new HandleProtocol(channel, child, deliverHandled);
  // One handle protocol per connection, since one NODE_HANDLE at a time may
  // wait for its answer: the channel's own sends with a handle
  // (child.channel.send(message, socket)) go through this one too, and
  // queue behind the same handle.
  if (channel._handles !== null) channel._handles = protocol;
  // Node's own handle bookkeeping listens on 'internalMessage', so listeners
  // there see NODE_HANDLE, NODE_HANDLE_ACK and NODE_HANDLE_NACK too.
  const handleHook = channel._handleHook;
  channel._handleHook = (message, fd) => {
    handleHook(message, fd);
    deliver(message, undefined, true);
  };
  channel._setConsumer(consume);
  channel.on('internalMessage', (message) => deliver(message, undefined, true));
  channel._handleAnnounce = (message) => deliver(message, undefined, true);

  // A send to a peer that has died fails as Node's does (lib/write-failure.js):
  // the callbacks of what was not written get EPIPE instead of the channel's
  // close, and sends without a callback make one 'error' (Node makes one per
  // send; unhandled, the first ends the process either way). plainEnd: the
  // byte count after the last send without a callback whose errors count.
  let writeFailure = null;
  let plainEnd = 0;
  channel[kWriteFailed] = (errnoName, written) => {
    if (writeFailure !== null || (errnoName !== 'EPIPE' && errnoName !== 'ECONNRESET')) return;
    writeFailure = errnoName;
    if (plainEnd > written) process.nextTick(() => child.emit('error', writeErrnoException(errnoName)));
  };
  const nodeFacingSendError = (err) => {
    if (writeFailure !== null && err && err.code === 'ERR_PROCWIRE_CHANNEL_CLOSED') return writeErrnoException(writeFailure);
    return nodeFacing(err);
  };

  // options.transfer (procwire's transfer list) rides along Node's options.
  const emitSendError = (err) => child.emit('error', nodeFacing(err));
  const writeNow = (message, options, callback) => {
    try {
      const result = channel._sendPlain(message, callback, options.swallowErrors, emitSendError,
        options.transfer !== undefined ? options : undefined);
      if (callback === undefined && !options.swallowErrors) plainEnd = channel._pushed;
      return result;
    } catch (err) {
      if (err && err.code === 'ERR_PROCWIRE_UNSERIALIZABLE') {
        throw nodeSerializationError(err, message, channel.serialization);
      }
      throw err;
    }
  };

  child.send = function send(message, handle, options, callback) {
    // send(message) alone, the common call, builds no options of its own.
    if (handle === undefined && options === undefined && callback === undefined) {
      options = DEFAULT_SEND_OPTIONS;
    } else {
      [handle, options, callback] = normalizeSendArgs(handle, options, callback);
    }
    if (this.connected) return this._send(message, handle, options, callback);
    const err = nodeError('ERR_IPC_CHANNEL_CLOSED');
    if (typeof callback === 'function') process.nextTick(callback, err);
    else process.nextTick(() => this.emit('error', err));
    return false;
  };

  child._send = function _send(message, handle, options, callback) {
    checkMessage(message);
    if (typeof options === 'boolean') options = { swallowErrors: options };
    if (options === undefined || options === null) options = { swallowErrors: false };
    if (typeof callback === 'function' && !callback[kNodeFacing]) {
      const userCallback = callback;
      callback = (err) => userCallback(nodeFacingSendError(err));
      callback[kNodeFacing] = true;
    }
    return protocol.send(message, handle, options, callback, writeNow);
  };

  child._afterQueue = function afterQueue() {
    // A disconnect() asked for while handles were in flight happens now.
    if (!this.connected && this.channel && !this._handleQueue) this._disconnect();
  };

  child.disconnect = function disconnect() {
    if (!this.connected) {
      this.emit('error', nodeError('ERR_IPC_DISCONNECTED'));
      return;
    }
    this.connected = false;
    if (!this._handleQueue) this._disconnect();
  };

  child._disconnect = function _disconnect() {
    if (!this.channel) return;
    this.channel = null;
    if (this._pendingMessage) protocol._release();
    process.nextTick(() => {
      channel.close();
      child.emit('disconnect');
    });
  };

  if (!childSide) {
    child.request = (value, opts) => channel.request(value, opts);
    child.respond = (handler) => channel.respond(handler);
  }

  let closedCounted = false;
  channel.on('close', (reason) => {
    // The peer went away (or the channel failed): Node disconnects, drops
    // the channel (even with handles still queued) and counts it as closed
    // for 'close'. A disconnect() of ours does not count: Node's 'close'
    // then never comes, and neither does ours.
    if (child.connected) child.disconnect();
    // A handle still waiting for its acknowledgement never gets one now.
    if (child._pendingMessage) protocol._release();
    child.channel = null;
    if (!childSide && !closedCounted && reason !== 'local' && reason !== 'destroyed') {
      closedCounted = true;
      child._closesGot++;
      if (child._closesGot === child._closesNeeded) child.emit('close', child.exitCode, child.signalCode);
    }
  });
  channel.on('error', (err) => {
    if (child.listenerCount('error') > 0) child.emit('error', err);
  });
}

module.exports = {
  HandleProtocol, setupChildProcess, normalizeSendArgs, checkMessage, isInternal, handleType, discardHandle,
};
