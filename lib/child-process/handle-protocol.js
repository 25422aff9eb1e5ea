'use strict';
// HandleProtocol: passing handles (sockets, servers, UDP sockets) the way
// Node's own IPC does, so either end may be plain Node: the message is
// wrapped as { cmd: 'NODE_HANDLE', type, msg }, the descriptor rides beside
// that frame (SCM_RIGHTS), the receiver answers NODE_HANDLE_ACK (or
// NODE_HANDLE_NACK when no descriptor came, and the sender tries again, up
// to 3 times), and everything sent while a handle waits for its answer is
// queued behind it so the order holds. One per channel: the Channel makes it
// (lib/channel/channel.js) and the ChildProcess surface takes it over.

const { nodeError, makeError } = require('../errors');
const { binding } = require('../native');
const { CMD, isInternal } = require('../protocol');
const { kCaps, kWriter, kControl } = require('../channel/symbols');
const {
  handleType, prepareSend, receiveHandle, SentSockets, ReceivedSockets,
} = require('./handle-conversion');

// Node retransmits a handle this many times after a NODE_HANDLE_NACK.
const MAX_HANDLE_RETRANSMISSIONS = 3;

function isHandleAnswer(message) {
  return message !== null && typeof message === 'object' &&
    (message.cmd === CMD.HANDLE_ACK || message.cmd === CMD.HANDLE_NACK);
}


// Handle passing for one channel. `host` is the object users call (the
// ChildProcess, or the Channel itself): it holds _handleQueue and
// _pendingMessage as Node's ChildProcess does, and `deliver(message, handle,
// internal)` emits what arrives.
class HandleProtocol {
  // resend(message, handle, options, callback): the host's own send, for
  // what waited behind a handle (Node's child._send).
  constructor(channel, host, deliver, resend) {
    this.channel = channel;
    this.host = host;
    this.deliver = deliver;
    this.resend = resend;
    host._handleQueue = null;
    host._pendingMessage = null;
    this.sent = new Map();
    this.received = new Map();
    // (message): also told of every NODE_HANDLE, NODE_HANDLE_ACK and
    // NODE_HANDLE_NACK after this protocol handled it (the ChildProcess
    // surface emits them as 'internalMessage', as Node's own bookkeeping
    // listens there), or null.
    this.announce = null;
    // (): called after what waited behind a handle was sent again (the
    // ChildProcess surface finishes a disconnect() asked for meanwhile), or
    // null.
    this.afterQueue = null;
    channel[kControl].handleHook = (message, fd) => {
      this._onControl(message, fd);
      if (this.announce !== null) this.announce(message);
    };
  }

  // The ChildProcess surface takes the protocol over: `host` (the
  // ChildProcess, or process in a child) holds the queue from now on, and
  // what arrives goes to `deliver` and `announce`.
  attach(host, deliver, announce, resend) {
    this.host = host;
    this.deliver = deliver;
    this.announce = announce;
    this.resend = resend;
    host._handleQueue = null;
    host._pendingMessage = null;
  }

  socketList(kind, key) {
    const lists = this[kind];
    let list = lists.get(key);
    if (list === undefined) {
      list = kind === 'sent' ? new SentSockets(this.host, key, this) : new ReceivedSockets(this.host, key, this);
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
      if (!this.channel[kCaps].handles) {
        throw makeError('ERR_PROCWIRE_HANDLE_UNSUPPORTED',
          `a ${this.channel.transport} channel cannot pass handles; only unix sockets (fork, named channels) can`);
      }
      if (host._handleQueue) {
        host._handleQueue.push({ callback, handle, options, message });
        return host._handleQueue.length === 1;
      }
      const wrapper = { cmd: CMD.HANDLE, type, msg: message };
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
      const refused = this.channel[kWriter].sendWithDescriptor(wrapper, prepared.fd, callback);
      if (prepared.release) prepared.release();
      return refused;
    }
    const ok = this.channel[kWriter].sendWithDescriptor(wrapper, prepared.fd, callback);
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
    if (message.cmd === CMD.HANDLE) {
      if (fd === undefined) {
        // The message came without its descriptor (for example it was cut
        // off as MSG_CTRUNC): tell the sender, which tries again.
        this._answer(CMD.HANDLE_NACK);
        return;
      }
      if (this.channel.closed) {
        binding.closeFd(fd);
        return;
      }
      this._answer(CMD.HANDLE_ACK);
      receiveHandle(message, fd, (handle) => this.deliver(message.msg, handle, isInternal(message.msg)), this);
      return;
    }
    // NODE_HANDLE_ACK or NODE_HANDLE_NACK.
    const pending = host._pendingMessage;
    let resend = null;
    if (pending) {
      if (message.cmd === CMD.HANDLE_ACK) {
        this.release();
      } else if (pending.retransmissions >= MAX_HANDLE_RETRANSMISSIONS) {
        this.release();
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
    for (const item of queue) this.resend(item.message, item.handle, item.options, item.callback);
    if (this.afterQueue !== null) this.afterQueue();
  }

  _answer(cmd) {
    // Not initiated by the user: failing to answer is not their error.
    if (this.channel.connected) this.channel[kWriter].sendControl({ cmd });
  }

  // Lets go of the handle in flight (it reached the peer, or never will).
  release() {
    const pending = this.host._pendingMessage;
    this.host._pendingMessage = null;
    if (pending && pending.prepared.release) pending.prepared.release();
  }
}

module.exports = { HandleProtocol };
