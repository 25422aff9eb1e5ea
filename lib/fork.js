'use strict';
// procwire.fork(): child_process.fork with the parent's end of the channel
// run natively, and procwire.parent: the child's end when the parent chose a
// procwire child.
//
// How the two modes are chosen (options.child):
//   'node' (default): the child is plain Node. procwire makes the socketpair
//     and sets NODE_CHANNEL_FD / NODE_CHANNEL_SERIALIZATION_MODE exactly as
//     Node's fork does, so the child's built-in process.send/on('message')
//     work unchanged; only the parent side is native.
//   'procwire': the child uses require('procwire').parent. The socket is
//     handed over as PROCWIRE_CHANNEL_FD instead (Node would otherwise start
//     reading it before any user code), and both ends are native.
// The wire format is Node's either way.

const childProcess = require('child_process');
const { binding } = require('./native');
const { Channel } = require('./channel');
const { systemError } = require('./errors');
const {
  invalidArg, validateObject, validateSerialization, validateMaxMessageSize,
} = require('./validate');

const CHILD_MODES = ['node', 'procwire'];

function normalizeForkArgs(args, options) {
  if (args !== undefined && !Array.isArray(args)) {
    if (options === undefined && typeof args === 'object' && args !== null) {
      options = args;
      args = [];
    } else {
      throw invalidArg('args must be an array');
    }
  }
  return [args || [], validateObject(options, 'options')];
}

function fork(modulePath, args, options) {
  if (typeof modulePath !== 'string' && !(modulePath instanceof URL)) {
    throw invalidArg('modulePath must be a string or URL');
  }
  [args, options] = normalizeForkArgs(args, options);
  const serialization = validateSerialization(options.serialization);
  const maxMessageSize = validateMaxMessageSize(options.maxMessageSize);
  const childMode = options.child === undefined ? 'node' : options.child;
  if (!CHILD_MODES.includes(childMode)) throw invalidArg('options.child must be "node" or "procwire"');

  let stdio = options.stdio;
  if (stdio === undefined) stdio = options.silent ? ['pipe', 'pipe', 'pipe'] : ['inherit', 'inherit', 'inherit'];
  else if (typeof stdio === 'string') stdio = [stdio, stdio, stdio];
  else if (Array.isArray(stdio)) stdio = stdio.filter((s) => s !== 'ipc');
  else throw invalidArg('options.stdio must be a string or an array');

  const pair = binding.socketPair();
  if (typeof pair === 'number') throw systemError('ERR_PROCWIRE_SOCKET', pair, 'socketpair');
  const [parentFd, childFd] = pair;
  const slot = Math.max(3, stdio.length);
  const fullStdio = stdio.slice();
  while (fullStdio.length < slot) fullStdio.push('ignore');
  fullStdio[slot] = childFd;

  const env = { ...(options.env || process.env) };
  delete env.NODE_CHANNEL_FD;
  delete env.NODE_CHANNEL_SERIALIZATION_MODE;
  delete env.PROCWIRE_CHANNEL_FD;
  delete env.PROCWIRE_SERIALIZATION;
  if (childMode === 'node') {
    env.NODE_CHANNEL_FD = String(slot);
    env.NODE_CHANNEL_SERIALIZATION_MODE = serialization;
  } else {
    env.PROCWIRE_CHANNEL_FD = String(slot);
    env.PROCWIRE_SERIALIZATION = serialization;
  }

  const execArgv = options.execArgv || process.execArgv;
  const spawnOptions = { ...options, stdio: fullStdio, env };
  delete spawnOptions.serialization;
  delete spawnOptions.child;
  delete spawnOptions.maxMessageSize;
  delete spawnOptions.highWaterMark;
  delete spawnOptions.maxQueuedBytes;
  delete spawnOptions.requestTimeout;
  delete spawnOptions.maxSegmentsInFlight;
  delete spawnOptions.outOfLine;
  delete spawnOptions.outOfLineThreshold;
  delete spawnOptions.silent;
  delete spawnOptions.execArgv;
  delete spawnOptions.execPath;
  let child;
  try {
    child = childProcess.spawn(options.execPath || process.execPath,
      [...execArgv, String(modulePath instanceof URL ? modulePath.pathname : modulePath), ...args],
      spawnOptions);
  } finally {
    // The child has its copy (or spawn failed); ours would keep the socket
    // open after the child dies and hide its exit from the channel.
    binding.closeFd(childFd);
  }

  const channel = new Channel(parentFd, {
    serialization, maxMessageSize, highWaterMark: options.highWaterMark, maxQueuedBytes: options.maxQueuedBytes, transport: 'fork',
    peer: { pid: child.pid, mode: childMode },
    // A plain Node child reads Node's format only: no segments.
    segments: childMode === 'procwire',
    outOfLine: options.outOfLine,
    outOfLineThreshold: options.outOfLineThreshold,
    requestTimeout: options.requestTimeout,
    maxSegmentsInFlight: options.maxSegmentsInFlight,
  });
  attach(child, channel);
  return child;
}

// Gives the ChildProcess the IPC surface Node users know: send, connected,
// disconnect(), 'message' and 'disconnect', plus procwire's channel as
// child.channel (request/respond/stats live there).
function attach(child, channel) {
  child.channel = channel;
  child.send = (...a) => channel.send(...a);
  child.request = (value, opts) => channel.request(value, opts);
  child.respond = (handler) => channel.respond(handler);
  child.disconnect = () => channel.close();
  Object.defineProperty(child, 'connected', { get: () => channel.connected, configurable: true });
  // Forward only once someone listens on the child, so messages that arrive
  // earlier wait in the channel's backlog rather than being emitted to nobody.
  let forwarding = false;
  const forward = (m) => child.emit('message', m);
  child.on('newListener', (event) => {
    if (event === 'message' && !forwarding) {
      forwarding = true;
      channel.on('message', forward);
    }
  });
  channel.on('close', () => child.emit('disconnect'));
  channel.on('error', (err) => {
    if (child.listenerCount('error') > 0) child.emit('error', err);
  });
}

let parentChannel;
// The child's end of a channel made by fork(..., { child: 'procwire' }), or
// null when this process was not started that way. Like Node's child side, it
// keeps the process alive only while 'message' or 'disconnect' listeners (or
// requests) exist.
function getParent() {
  if (parentChannel !== undefined) return parentChannel;
  const fdText = process.env.PROCWIRE_CHANNEL_FD;
  const { isMainThread } = require('worker_threads');
  if (fdText === undefined || !isMainThread) {
    parentChannel = null;
    return null;
  }
  const fd = Number(fdText);
  const serialization = process.env.PROCWIRE_SERIALIZATION || 'advanced';
  delete process.env.PROCWIRE_CHANNEL_FD;
  delete process.env.PROCWIRE_SERIALIZATION;
  if (!Number.isInteger(fd) || fd < 0) {
    parentChannel = null;
    return null;
  }
  binding.setBlocking(fd, false);
  parentChannel = new Channel(fd, {
    serialization, transport: 'fork', refPolicy: 'listeners', peer: { pid: process.ppid }, segments: true,
  });
  return parentChannel;
}

module.exports = { fork, getParent };
