'use strict';
// The one place an address chooses its backend. Each scheme: a name, a test
// on (target, options), and the backend module, which exports
// listen(target[, options][, onChannel]) -> server and
// connect(target[, options]) -> Promise<Channel>. The first match wins; a
// new transport is one file in this folder and one line here.
//
//   'nats://host:port'            NATS (./nats/)
//   { port, host } + options.tls  TLS over TCP (./tls.js)
//   { port, host }                TCP (./socket.js or ./fallback.js)
//   name, path, { path }, { name, abstract }   unix sockets (./socket.js, or
//                                 ./fallback.js when the addon is not loaded)

const { attachAsyncFrames } = require('../error-context');
const { debug } = require('../debug');
const { channelSettings } = require('../channel');

const SCHEMES = [
  { name: 'nats', matches: (target) => typeof target === 'string' && /^nats:\/\//i.test(target), load: () => require('./nats') },
  { name: 'tls', matches: (target, options) => isTcp(target) && Boolean(options && options.tls), load: () => require('./tls') },
  // Without the addon, unix sockets and TCP run on `net` (./fallback.js).
  { name: 'socket', matches: () => true, load: () => (require('../native').native ? require('./socket') : require('./fallback')) },
];

function isTcp(target) {
  return target !== null && typeof target === 'object' && target.port !== undefined;
}

// The backend module for an address. Modules load on first use, so the
// optional `nats` package is only required by those who use it.
function backendFor(target, options) {
  const opts = typeof options === 'object' && options !== null ? options : undefined;
  for (const scheme of SCHEMES) {
    if (scheme.matches(target, opts)) return scheme.load();
  }
  /* c8 ignore next */
  throw new Error('unreachable: the socket scheme matches every address');
}

// The options a channel will be made with are checked before any socket
// exists: a bad one must fail listen() (not each connection later, where
// the error would have nobody to catch it) and connect() (before it has a
// socket to leak).
function checkChannelOptions(options) {
  if (typeof options === 'object' && options !== null) channelSettings(options);
}

function listen(target, options, onChannel) {
  checkChannelOptions(options);
  if (debug.enabled) debug('listen %j', target);
  return backendFor(target, options).listen(target, options, onChannel);
}

// A failure reported later (a refused connection, a failed hello) carries
// the frames of the code that awaits connect(), added once it failed.
async function connect(target, options) {
  try {
    checkChannelOptions(options);
    if (debug.enabled) debug('connect %j', target);
    const channel = await backendFor(target, options).connect(target, options);
    if (debug.enabled) debug('connect %j: open (%s)', target, channel.transport);
    return channel;
  } catch (err) {
    if (debug.enabled) debug('connect %j failed: %s', target, err && err.message);
    throw attachAsyncFrames(err);
  }
}

module.exports = { listen, connect, backendFor, SCHEMES };
