'use strict';
// procwire's pure-JavaScript codec binding: what lib/native.js loads when no
// addon does (or with PROCWIRE_FORCE_FALLBACK=1). It supplies the addon's
// codec surface (encode, decode, the framer, alloc) on Node's `v8`
// serializer, byte-identical to the addon's. Sockets are not here: named
// channels and TCP run on the `net` backend (lib/transport/fallback.js),
// and fork() hands its channel to Node's own pipe (lib/fork.js).
//
// NativeChannel exists for one case: a real descriptor this process
// inherited (a procwire child's channel, PROCWIRE_CHANNEL_FD), which becomes
// a net.Socket under a StreamHandle.

const fs = require('fs');
const net = require('net');
const codec = require('./codec');
const { JsFramer } = require('./framer');
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

// A StreamHandle with the JS codec and framer, for the `net` backend
// (lib/transport/fallback.js) and fork()'s pipe. Shared-memory segments
// need descriptor passing, which net sockets cannot do from JavaScript:
// every message goes inline, whatever the threshold.
class JsStreamHandle extends StreamHandle {
  constructor(stream, callbacks, options) {
    super(stream, callbacks, { ...options, encode, createFramer });
  }

  // write(value[, transfer]): the bytes go inline; transferred buffers are
  // detached all the same, as the caller was promised.
  write(value, transfer) {
    const total = super.write(value);
    if (transfer !== undefined) detach(transfer);
    return total;
  }
}

// new NativeChannel(fd, format, maxMessageSize, connecting, callbacks)
// over an inherited socket descriptor.
class NativeChannel extends JsStreamHandle {
  constructor(fd, format, max, connecting, callbacks) {
    // As the addon does, anything but an open socket is refused with a
    // coded error.
    let isSocket = false;
    try { isSocket = fs.fstatSync(fd).isSocket(); } catch { /* not open */ }
    if (!isSocket) {
      throw require('../errors').makeError('ERR_PROCWIRE_INVALID_ARG',
        `procwire fallback: descriptor ${fd} is not an open socket`);
    }
    const stream = new net.Socket({ fd, readable: true, writable: true, allowHalfOpen: true });
    super(stream, callbacks, { format, maxMessageSize: max, connecting, fd });
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

function closeFd(fd) {
  try { fs.closeSync(fd); } catch { /* not open */ }
}

// libuv makes an inherited descriptor non-blocking when it opens it.
function setBlocking() {
  return true;
}

// SO_PEERCRED has no JavaScript API: the errno name, as the addon reports a
// failed call.
function peerCredentials() {
  return 'ENOSYS';
}

module.exports = {
  fallback: true,
  setup,
  encode,
  decode,
  closeFd,
  setBlocking,
  peerCredentials,
  alloc,
  NativeFramer,
  NativeChannel,
  JsStreamHandle,
};
