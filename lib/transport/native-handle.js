'use strict';
// The native backend's handle: a NativeChannel (the addon's, or the
// fallback binding's over an inherited socket) for one socket descriptor,
// with the capabilities it has (lib/transport/contract.js). Channel gets
// it through createHandle like any other backend's and never looks at
// which methods the handle has.

const { binding, native } = require('../native');
const codec = require('../codec');
const { invalidArg } = require('../validate');
const { capabilities } = require('./contract');

// The addon over a unix socket (fork channels, named unix channels):
// descriptors ride on frames, so handles, segments and rings can too.
const UNIX_CAPABILITIES = capabilities({
  descriptors: true, segments: true, handles: true, rings: true, frames: true, stagedWrites: true,
  jsDecode: true, segmentPool: true, readLimit: true, fd: true, written: true,
});
// The addon over TCP: no descriptors, so no handles or rings. Segments
// are the channel's to leave off (options.segments).
const TCP_CAPABILITIES = capabilities({
  segments: true, frames: true, stagedWrites: true, jsDecode: true, segmentPool: true, readLimit: true, fd: true,
  written: true,
});
// The fallback binding's NativeChannel: a StreamHandle over a net.Socket.
const FALLBACK_CAPABILITIES = capabilities({ readLimit: true, fd: true });

// nativeHandle(fd, transport) -> createHandle(callbacks, options) for a
// connected (or connecting) non-blocking stream socket the channel now
// owns. options: { serialization, maxMessageSize, connecting,
// segmentThreshold (-1: none), segmentCounters (Float64Array(2) or null) }.
// Anything but a descriptor throws a coded error (the addon's constructor
// checks the descriptor itself too), never aborts.
function nativeHandle(fd, transport) {
  if (!(Number.isInteger(fd) && fd >= 0 && fd < 2 ** 31)) {
    throw invalidArg('Channel is made by fork(), listen() and connect(); it needs a socket descriptor');
  }
  const caps = !native ? FALLBACK_CAPABILITIES : transport === 'fork' || transport === 'unix'
    ? UNIX_CAPABILITIES : TCP_CAPABILITIES;
  return function createNativeHandle(callbacks, options) {
    const format = codec.codecFor(options.serialization).id;
    const handle = options.segmentCounters === null
      ? new binding.NativeChannel(fd, format, options.maxMessageSize, options.connecting, callbacks,
        options.segmentThreshold)
      : new binding.NativeChannel(fd, format, options.maxMessageSize, options.connecting, callbacks,
        options.segmentThreshold, options.segmentCounters);
    handle.capabilities = caps;
    return handle;
  };
}

module.exports = { nativeHandle };
