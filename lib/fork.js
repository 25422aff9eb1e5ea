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

const { binding } = require('./native');
const { Channel, channelSettings } = require('./channel');
const { systemError, nodeError } = require('./errors');
const { kCloseContext, childCloseContext } = require('./error-context');
const { debug } = require('./debug');
const { invalidArg } = require('./validate');
const { isMainThread } = require('./main-thread');
const { childPreload } = require('./start-bundle');
// child_process, url and the ChildProcess surface are loaded by the first
// fork(), not here: a procwire child (which loads this file for
// procwire.parent) never forks, and child_process alone brings net, dgram
// and streams.

const CHILD_MODES = ['node', 'procwire', 'native'];
// Options procwire reads and spawn() must not see.
const PROCWIRE_OPTIONS = ['child', 'maxMessageSize', 'highWaterMark', 'maxQueuedBytes', 'outOfLine',
  'outOfLineThreshold', 'requestTimeout', 'maxSegmentsInFlight', 'maxConcurrentRequests', 'rings',
  'segmentPool', 'segmentPoolMaxBytes', 'segmentPoolMaxCount', 'segmentPoolIdleTimeout'];
// Node 26 dropped child._channel (DEP0129 reached end of life).
const LEGACY_CHANNEL_ALIAS = Number(process.versions.node.split('.')[0]) < 26;

// Node's check of modulePath: a string, Buffer or URL (a file: URL becomes a
// path, escapes decoded), without null bytes.
function validatedModulePath(modulePath) {
  const isURL = modulePath != null && typeof modulePath === 'object' && Boolean(modulePath.href) &&
    Boolean(modulePath.protocol) && modulePath.auth === undefined && modulePath.path === undefined;
  if (isURL) modulePath = require('url').fileURLToPath(modulePath);
  if (typeof modulePath !== 'string' && !(modulePath instanceof Uint8Array)) {
    throw nodeError('ERR_INVALID_ARG_TYPE', 'modulePath', 'of type string or an instance of Buffer or URL', modulePath);
  }
  const text = typeof modulePath === 'string' ? modulePath : Buffer.from(modulePath).toString();
  if (text.includes('\u0000')) {
    throw nodeError('ERR_INVALID_ARG_VALUE', 'modulePath', modulePath, 'must be a string, Uint8Array, or URL without null bytes');
  }
  return text;
}

// Where the child's own process.send can be served natively without any
// difference ('native'), that is the default; elsewhere the child keeps
// Node's IPC ('node'): when this process runs on the JS fallback, when the
// child runs another binary (whose ABI the addon may not match), and under
// the permission model (which refuses addons unless allowed, and may refuse
// reading the preload).
// A child started with --expose-internals may reach Node's own channel handle
// (process[kChannelHandle], as Node's own tests do), which only Node's IPC
// sets: it keeps Node's channel too.
const PERMISSION_FLAG = /(^|\s)--(experimental-)?permission\b/;
const INTERNALS_FLAG = /(^|\s)--expose[-_]internals\b/;
const KEEPS_NODE_IPC = [PERMISSION_FLAG, INTERNALS_FLAG];
function defaultChildMode(options) {
  const { native } = require('./native');
  if (!native) return 'node';
  if (options.execPath !== undefined && options.execPath !== process.execPath) return 'node';
  const execArgv = options.execArgv || process.execArgv;
  if (execArgv.some((a) => KEEPS_NODE_IPC.some((flag) => flag.test(a)))) return 'node';
  const env = options.env || process.env;
  if (typeof env.NODE_OPTIONS === 'string' && KEEPS_NODE_IPC.some((flag) => flag.test(env.NODE_OPTIONS))) return 'node';
  return 'native';
}

// Node's stdioStringToArray(stdio, 'ipc').
function stdioFromString(stdio) {
  switch (stdio) {
    case 'ignore':
    case 'overlapped':
    case 'pipe': return [stdio, stdio, stdio, 'ipc'];
    case 'inherit': return [0, 1, 2, 'ipc'];
    default: throw nodeError('ERR_INVALID_ARG_VALUE', 'stdio', stdio);
  }
}

// fork(modulePath[, args][, options]) with child_process.fork's argument
// handling, checks and errors, and the channel run by procwire.
// Tells the child where its end of the channel is, for its child mode.
function setChannelEnv(env, mode, slot, serialization, maxMessageSize) {
  if (mode === 'node') {
    env.NODE_CHANNEL_FD = String(slot);
    env.NODE_CHANNEL_SERIALIZATION_MODE = serialization;
  } else if (mode === 'native') {
    // The child's own process.send is served natively: lib/child-preload.js
    // (or the start bundle that holds it, see lib/start-bundle.js) takes the channel and restores NODE_OPTIONS. It goes FIRST in
    // NODE_OPTIONS (Node runs NODE_OPTIONS' --require before the command
    // line's, and every --require before any --import), so it has scrubbed
    // its variables before a user's preload can spawn a helper, as Node
    // removes NODE_CHANNEL_FD before any preload runs.
    env.PROCWIRE_NATIVE_CHANNEL_FD = String(slot);
    env.PROCWIRE_NATIVE_SERIALIZATION = serialization;
    // The child's end refuses to send what the parent's end would refuse to
    // read, and no less.
    if (maxMessageSize !== undefined) env.PROCWIRE_NATIVE_MAX_MESSAGE_SIZE = String(maxMessageSize);
    // Unset when NODE_OPTIONS was unset: the preload then removes it.
    delete env.PROCWIRE_NATIVE_NODE_OPTIONS;
    if (env.NODE_OPTIONS !== undefined) env.PROCWIRE_NATIVE_NODE_OPTIONS = env.NODE_OPTIONS;
    env.NODE_OPTIONS = `--require ${JSON.stringify(childPreload(env))}${env.NODE_OPTIONS ? ` ${env.NODE_OPTIONS}` : ''}`;
  } else {
    env.PROCWIRE_CHANNEL_FD = String(slot);
    env.PROCWIRE_SERIALIZATION = serialization;
  }
}

function fork(modulePath, args, options) {
  modulePath = validatedModulePath(modulePath);
  if (args == null) {
    args = [];
  } else if (typeof args === 'object' && !Array.isArray(args)) {
    options = args;
    args = [];
  } else if (!Array.isArray(args)) {
    throw nodeError('ERR_INVALID_ARG_TYPE', 'args', 'an instance of Array', args);
  }
  if (options != null && (typeof options !== 'object' || Array.isArray(options))) {
    throw nodeError('ERR_INVALID_ARG_TYPE', 'options', 'of type object', options);
  }
  // A drop-in never runs the child through a shell, as Node's fork. Only
  // the options' own keys count, as in Node: a key someone put on
  // Object.prototype (execPath, execArgv, stdio, ...) is not an option.
  options = { __proto__: null, ...options, shell: false };

  const childMode = options.child === undefined ? defaultChildMode(options) : options.child;
  if (!CHILD_MODES.includes(childMode)) throw invalidArg('options.child must be "node", "procwire" or "native"');
  // Node's default is json; advanced is opt-in, as there (in every child
  // mode, so switching modes never changes what a message may hold).
  const serialization = options.serialization === undefined ? 'json' : options.serialization;
  if (serialization !== 'json' && serialization !== 'advanced') {
    throw nodeError('ERR_INVALID_ARG_VALUE', 'options.serialization', options.serialization,
      "must be one of: undefined, 'json', 'advanced'");
  }
  // The channel's options, checked before the child exists, so a bad value
  // throws with no child behind it.
  const channelOptions = {
    __proto__: null,
    serialization, maxMessageSize: options.maxMessageSize, highWaterMark: options.highWaterMark, maxQueuedBytes: options.maxQueuedBytes,
    transport: 'fork',
    outOfLine: options.outOfLine,
    rings: options.rings,
    outOfLineThreshold: options.outOfLineThreshold,
    requestTimeout: options.requestTimeout,
    maxSegmentsInFlight: options.maxSegmentsInFlight,
    segmentPool: options.segmentPool,
    segmentPoolMaxBytes: options.segmentPoolMaxBytes,
    segmentPoolMaxCount: options.segmentPoolMaxCount,
    segmentPoolIdleTimeout: options.segmentPoolIdleTimeout,
    maxConcurrentRequests: options.maxConcurrentRequests,
  };
  channelSettings(channelOptions);

  let execArgv = options.execArgv || process.execArgv;
  if (execArgv === process.execArgv && process._eval != null) {
    // Started with -e/-p: the code to evaluate must not be passed on, or
    // the child would run the parent's code again (Node strips it too).
    const index = execArgv.lastIndexOf(process._eval);
    if (index > 0) {
      execArgv = execArgv.slice();
      execArgv.splice(index - 1, 2);
    }
  }

  let stdio;
  if (typeof options.stdio === 'string') stdio = stdioFromString(options.stdio);
  else if (!Array.isArray(options.stdio)) stdio = stdioFromString(options.silent ? 'pipe' : 'inherit');
  else if (!options.stdio.includes('ipc')) throw nodeError('ERR_CHILD_PROCESS_IPC_REQUIRED', 'options.stdio');
  else stdio = options.stdio.slice();
  const slot = stdio.indexOf('ipc');
  if (stdio.indexOf('ipc', slot + 1) !== -1) throw nodeError('ERR_IPC_ONE_PIPE');

  // Without the addon there is no socketpair() in JavaScript: the slot
  // becomes a 'pipe', which libuv makes a unix socketpair, and the parent's
  // end (child.stdio[slot], a net.Socket) runs the channel.
  const { native } = require('./native');
  let parentFd = -1;
  let childFd = -1;
  if (native) {
    const pair = binding.socketPair();
    if (typeof pair === 'string') throw systemError('ERR_PROCWIRE_SOCKET', pair, 'socketpair');
    [parentFd, childFd] = pair;
  }
  // The channel keeps the position 'ipc' had, so child.stdio[n] and the
  // child's descriptors are where Node puts them.
  stdio[slot] = native ? childFd : 'pipe';

  const env = { ...(options.env || process.env) };
  delete env.NODE_CHANNEL_FD;
  delete env.NODE_CHANNEL_SERIALIZATION_MODE;
  delete env.PROCWIRE_CHANNEL_FD;
  delete env.PROCWIRE_SERIALIZATION;
  delete env.PROCWIRE_NATIVE_CHANNEL_FD;
  delete env.PROCWIRE_NATIVE_MAX_MESSAGE_SIZE;
  // A cluster worker sets up Node's IPC before any preload runs, so it keeps
  // Node's channel (mode 'node').
  const mode = childMode === 'native' && env.NODE_UNIQUE_ID !== undefined ? 'node' : childMode;
  // A plain child writes through Node's own channel, which never widens its
  // socket the way a procwire channel does on its first large message
  // (src/core/socket_io.h), so its end gets the larger send buffer now. For
  // its small messages that cost nothing measurable (json 64 B and 1 KiB,
  // advanced 1 KiB, 256 in flight); at 1 MiB it doubled the round trips.
  if (native && mode === 'node') binding.widenSendBuffer(childFd);
  setChannelEnv(env, mode, slot, serialization, options.maxMessageSize);

  const spawnOptions = { ...options, stdio, env };
  for (const key of PROCWIRE_OPTIONS) delete spawnOptions[key];
  delete spawnOptions.serialization;
  delete spawnOptions.silent;
  delete spawnOptions.execArgv;
  delete spawnOptions.execPath;
  let child;
  try {
    child = require('child_process').spawn(options.execPath || process.execPath, [...execArgv, modulePath, ...args],
      spawnOptions);
  } catch (err) {
    if (native) binding.closeFd(parentFd);
    throw err;
  } finally {
    // The child has its copy (or spawn failed); ours would keep the socket
    // open after the child dies and hide its exit from the channel.
    if (native) binding.closeFd(childFd);
  }

  const pipe = native ? null : child.stdio[slot];
  const channel = new Channel(native ? parentFd : null, {
    __proto__: null,
    ...channelOptions,
    ...(native ? {} : { createHandle: (callbacks, o) => require('./transport/fallback').streamHandle(pipe, callbacks, o) }),
    peer: { pid: child.pid, mode },
    // A plain Node child reads Node's format only: no segments.
    segments: mode !== 'node',
  });
  require('./child-process').setupChildProcess(child, channel, { legacyChannelAlias: LEGACY_CHANNEL_ALIAS });
  // Requests the child's death rejects say which child, how it ended and
  // what it last wrote to a piped stderr.
  channel[kCloseContext] = childCloseContext(child);
  debug('fork %s: pid %d, child mode %s, %s', modulePath, child.pid, mode, channel.serialization);
  return child;
}

let parentChannel;
// The child's end of a channel made by fork(..., { child: 'procwire' }), or
// null when this process was not started that way. Like Node's child side, it
// keeps the process alive only while 'message' or 'disconnect' listeners (or
// requests) exist.
function getParent() {
  return openParent(undefined);
}

// getParent() for lib/pool/worker-runtime.js, which opens the channel first
// in a pool's worker and gives it settings of its own (`settings`: channel
// options, or undefined). A later call gets the same channel whatever it
// passes.
function openParent(settings) {
  if (parentChannel !== undefined) return parentChannel;
  const fdText = process.env.PROCWIRE_CHANNEL_FD;
  if (fdText === undefined || !isMainThread()) {
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
    __proto__: null, ...settings, serialization, transport: 'fork', refPolicy: 'listeners', peer: { pid: process.ppid },
    segments: true,
  });
  return parentChannel;
}

module.exports = { fork, getParent, openParent };
