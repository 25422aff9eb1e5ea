'use strict';
// Node's child_process IPC surface over a procwire Channel: setupChildProcess
// gives a ChildProcess (or `process` in a child) Node's send, _send,
// connected, disconnect, _disconnect, channel, _channel, _handleQueue,
// _pendingMessage, 'message', 'internalMessage' and 'disconnect', with
// Node's events, timing, codes and messages, and procwire's extras
// (request, respond). Its parts: handle-protocol.js (one per channel),
// handle-conversion.js, inbox.js, control.js (the child side's ref
// counting) and node-compat.js (Node's checks and errors).

const { nodeError } = require('../errors');
const { kWriteFailed, writeErrnoException } = require('../write-failure');
const { kWriter, kInbox, kHandles, kSendPlain } = require('../channel/symbols');
const { HandleProtocol } = require('./handle-protocol');
const { SurfaceInbox } = require('./inbox');
const { ChildRefControl } = require('./control');
const {
  DEFAULT_SEND_OPTIONS, normalizeSendArgs, checkMessage, kNodeFacing, nodeFacing, nodeSerializationError,
  defineLegacyChannelAlias,
} = require('./node-compat');

// The parent side: the channel counts towards 'close' as Node's IPC pipe
// does, and kill() writes out what was sent first.
function setupParentSide(child, channel) {
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
      channel[kWriter].writeOutNow();
      return Reflect.apply(proto.kill, this, arguments);
    };
  }
}

// The channel's handle protocol, taken over by the surface (a channel that
// cannot take handles gets its first one here, which refuses them).
function surfaceProtocol(child, channel, inbox) {
  const deliver = (message, handle, internal) => inbox.deliverHandled(message, handle, internal);
  // Node's own handle bookkeeping listens on 'internalMessage', so listeners
  // there see NODE_HANDLE, NODE_HANDLE_ACK and NODE_HANDLE_NACK too.
  const announce = (message) => inbox.deliver(message, undefined, true);
  // One handle protocol per connection, since one NODE_HANDLE at a time may
  // wait for its answer: the channel's own sends with a handle
  // (child.channel.send(message, socket)) go through this one too, and
  // queue behind the same handle.
  const resend = (message, handle, options, callback) => child._send(message, handle, options, callback);
  const protocol = channel[kHandles] !== null ? channel[kHandles] : new HandleProtocol(channel, child, deliver, resend);
  protocol.attach(child, deliver, announce, resend);
  return protocol;
}

// Gives `child` (a ChildProcess spawned without Node's channel) Node's IPC
// surface on top of `channel`, with procwire's extras (request, respond).
// With { childSide: true } the same surface goes on `process` in a child
// (see lib/child-preload.js), as Node's own child side: the channel keeps
// the process alive only while 'message' or 'disconnect' listeners exist,
// unless process.channel.ref()/unref() said otherwise.
function setupChildProcess(child, channel, { legacyChannelAlias, childSide = false }) {
  child.channel = channel;
  if (legacyChannelAlias) defineLegacyChannelAlias(child);
  if (!childSide) setupParentSide(child, channel);
  else new ChildRefControl(child, channel);
  child.connected = true;

  const inbox = new SurfaceInbox(child, channel);
  child.on('newListener', () => inbox.onNewListener());
  const protocol = surfaceProtocol(child, channel, inbox);
  channel[kInbox].setConsumer(inbox.consume);
  channel.on('internalMessage', (message) => inbox.deliver(message, undefined, true));
  defineSend(child, channel, protocol, watchWriteFailure(child, channel));
  defineDisconnect(child, channel, protocol);
  if (!childSide) {
    child.request = (value, opts) => channel.request(value, opts);
    child.respond = (handler) => channel.respond(handler);
  }
  watchClose(child, channel, protocol, childSide);
}

// A send to a peer that has died fails as Node's does (lib/write-failure.js):
// the callbacks of what was not written get EPIPE instead of the channel's
// close, and sends without a callback make one 'error' (Node makes one per
// send; unhandled, the first ends the process either way). plainEnd: the
// byte count after the last send without a callback whose errors count.
function watchWriteFailure(child, channel) {
  const state = { failure: null, plainEnd: 0 };
  channel[kWriteFailed] = (errnoName, written) => {
    if (state.failure !== null || (errnoName !== 'EPIPE' && errnoName !== 'ECONNRESET')) return;
    state.failure = errnoName;
    if (state.plainEnd > written) process.nextTick(() => child.emit('error', writeErrnoException(errnoName)));
  };
  return state;
}

// send() and _send(): Node's checks, then the handle protocol, then the
// channel. options.transfer (procwire's transfer list) rides along Node's
// options.
function defineSend(child, channel, protocol, writes) {
  const nodeFacingSendError = (err) => {
    if (writes.failure !== null && err && err.code === 'ERR_PROCWIRE_CHANNEL_CLOSED') {
      return writeErrnoException(writes.failure);
    }
    return nodeFacing(err);
  };
  const emitSendError = (err) => child.emit('error', nodeFacing(err));
  const writeNow = (message, options, callback) => {
    try {
      const result = channel[kSendPlain](message, callback, options.swallowErrors, emitSendError,
        options.transfer !== undefined ? options : undefined);
      if (callback === undefined && !options.swallowErrors) writes.plainEnd = channel[kWriter].pushed;
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
}

// disconnect() and _disconnect(), waiting for handles in flight as Node does.
function defineDisconnect(child, channel, protocol) {
  protocol.afterQueue = () => {
    // A disconnect() asked for while handles were in flight happens now.
    if (!child.connected && child.channel && !child._handleQueue) child._disconnect();
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
    if (this._pendingMessage) protocol.release();
    process.nextTick(() => {
      channel.close();
      child.emit('disconnect');
    });
  };
}

function watchClose(child, channel, protocol, childSide) {
  let closedCounted = false;
  channel.on('close', (reason) => {
    // The peer went away (or the channel failed): Node disconnects, drops
    // the channel (even with handles still queued) and counts it as closed
    // for 'close'. A disconnect() of ours does not count: Node's 'close'
    // then never comes, and neither does ours.
    if (child.connected) child.disconnect();
    // A handle still waiting for its acknowledgement never gets one now.
    if (child._pendingMessage) protocol.release();
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

module.exports = { setupChildProcess };
