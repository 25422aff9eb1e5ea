'use strict';
// Loaded before the main module of a child forked with { child: 'native' }
// (through NODE_OPTIONS, so the child's process.execArgv stays as Node's
// fork makes it). The parent passes the channel as PROCWIRE_NATIVE_CHANNEL_FD
// instead of NODE_CHANNEL_FD, so Node does not open it; this gives `process`
// the child side of Node's IPC (process.send, process.on('message'),
// process.channel, process.connected, process.disconnect(),
// 'internalMessage', handles) on procwire's native channel. The child's code
// is unchanged. Afterwards NODE_OPTIONS is what it was, so grandchildren do
// not inherit the preload unless forked the same way.

const ENV_FD = 'PROCWIRE_NATIVE_CHANNEL_FD';
const ENV_SERIALIZATION = 'PROCWIRE_NATIVE_SERIALIZATION';
const ENV_NODE_OPTIONS = 'PROCWIRE_NATIVE_NODE_OPTIONS';
const ENV_MAX_MESSAGE_SIZE = 'PROCWIRE_NATIVE_MAX_MESSAGE_SIZE';

function setup() {
  const fdText = process.env[ENV_FD];
  if (fdText === undefined || !require('./main-thread').isMainThread()) return;
  const serialization = process.env[ENV_SERIALIZATION] === 'advanced' ? 'advanced' : 'json';
  const savedOptions = process.env[ENV_NODE_OPTIONS];
  // The parent's maxMessageSize, when it set one (checked there).
  const maxMessageSize = process.env[ENV_MAX_MESSAGE_SIZE] === undefined ? undefined : Number(process.env[ENV_MAX_MESSAGE_SIZE]);
  if (savedOptions === undefined) delete process.env.NODE_OPTIONS;
  else process.env.NODE_OPTIONS = savedOptions;
  delete process.env[ENV_FD];
  delete process.env[ENV_SERIALIZATION];
  delete process.env[ENV_NODE_OPTIONS];
  delete process.env[ENV_MAX_MESSAGE_SIZE];
  const fd = Number(fdText);
  if (!Number.isInteger(fd) || fd < 0 || typeof process.send === 'function') return;
  const { binding } = require('./native');
  // The class itself, not through lib/channel.js and lib/channel/index.js:
  // two files fewer on a child's start.
  const { Channel } = require('./channel/channel');
  const { setupChildProcess } = require('./child-process');
  binding.setBlocking(fd, false);
  const channel = new Channel(fd, {
    __proto__: null, serialization, transport: 'fork', peer: { pid: process.ppid }, segments: serialization === 'advanced',
    ...(Number.isInteger(maxMessageSize) && maxMessageSize > 0 ? { maxMessageSize } : {}),
  });
  setupChildProcess(process, channel, {
    legacyChannelAlias: Number(process.versions.node.split('.')[0]) < 26, childSide: true,
  });
}

setup();

module.exports = { ENV_FD, ENV_SERIALIZATION, ENV_NODE_OPTIONS, ENV_MAX_MESSAGE_SIZE };
