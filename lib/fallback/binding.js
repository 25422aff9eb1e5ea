'use strict';
// procwire's pure-JavaScript binding: the native addon's exact surface
// (src/binding/addon.cc, channel.cc) on Node's `v8` serializer and `net`
// sockets. lib/native.js uses it when no addon loads (or with
// PROCWIRE_FORCE_FALLBACK=1). Frames are byte-identical to the addon's;
// slower, and without SO_PEERCRED (peerCredentials() returns -ENOSYS, so
// uid allow-lists need the addon).

const fs = require('fs');
const net = require('net');
const codec = require('./codec');
const { JsFramer } = require('./framer');
const sockets = require('./sockets');
const { StreamHandle } = require('../transport/stream');

function setup(Buffer, makeError) {
  codec.setup(Buffer, makeError);
}

function encode(format, value) {
  return codec.encode(format, value);
}

function decode(format, view) {
  return codec.decode(format, view);
}

class NativeFramer extends JsFramer {
  constructor(format, max) {
    super(format, max, codec.decode);
  }
}

const createFramer = (format, max) => new JsFramer(format, max, codec.decode);

// new NativeChannel(fd, format, maxMessageSize, connecting, callbacks[, outOfLineThreshold])
// Shared-memory segments need descriptor passing, which net sockets cannot
// do from JavaScript: every message goes inline, whatever the threshold.
class NativeChannel extends StreamHandle {
  constructor(fd, format, max, connecting, callbacks) {
    const entry = sockets.claim(fd);
    let stream = null;
    if (entry === undefined) {
      // A descriptor this process was handed (a procwire child's channel).
      // As the addon does, anything but an open socket is refused with a
      // coded error.
      let isSocket = false;
      try { isSocket = fs.fstatSync(fd).isSocket(); } catch { /* not open */ }
      if (!isSocket) {
        throw require('../errors').makeError('ERR_PROCWIRE_INVALID_ARG',
          `procwire fallback: descriptor ${fd} is not an open socket`);
      }
      stream = new net.Socket({ fd, readable: true, writable: true, allowHalfOpen: true });
    } else if (entry.kind === 'socket') {
      stream = entry.obj;
    } else if (entry.kind !== 'pending') {
      throw require('../errors').makeError('ERR_PROCWIRE_INVALID_ARG', `procwire fallback: descriptor ${fd} is not a socket`);
    }
    super(stream, callbacks, { format, maxMessageSize: max, connecting, encode, createFramer, fd });
    if (entry !== undefined && entry.kind === 'pending') {
      // The parent end of socketPair(): accepted a moment later.
      sockets.whenReady(entry, (socket, error) => {
        if (socket !== null) this.attach(socket);
        else this._end(error);
      });
    }
  }

  // write(value[, transfer]): the bytes go inline; transferred buffers are
  // detached all the same, as the caller was promised.
  write(value, transfer) {
    const total = super.write(value);
    if (transfer !== undefined) detach(transfer);
    return total;
  }

  // writeBuffer(view[, fds]): descriptors cannot ride along here.
  writeBuffer(view) {
    return super.writeBuffer(view);
  }
}

function detach(list) {
  for (const ab of list) {
    try { structuredClone(ab, { transfer: [ab] }); } catch { /* not transferable: left as is */ }
  }
}

// alloc(size): a plain zero-filled Buffer with its own memory (no
// shared-memory segments without the addon).
function alloc(size) {
  return codec.state.Buffer.alloc(size);
}

module.exports = {
  fallback: true,
  setup,
  encode,
  decode,
  socketPair: sockets.socketPair,
  closeFd: sockets.closeFd,
  setBlocking: sockets.setBlocking,
  listenUnix: sockets.listenUnix,
  connectUnix: sockets.connectUnix,
  listenTcp: sockets.listenTcp,
  connectTcp: sockets.connectTcp,
  peerCredentials: sockets.peerCredentials,
  alloc,
  NativeFramer,
  NativeChannel,
  NativeListener: sockets.NativeListener,
};
