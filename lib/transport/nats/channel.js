'use strict';
// The options of a core NATS channel and the checks both ends share. The
// channel is a plain Channel: its request retries are the request table's
// policy for a handle with capability `retries` (lib/channel/request-retry.js).

const { invalidArg, validateSize } = require('../../validate');
const { DEFAULT_MAX_MESSAGE_SIZE } = require('../../protocol');

const DEFAULT_PREFIX = '_PROCWIRE';
const DEFAULT_QUEUE = 'procwire';
const DEFAULT_HEARTBEAT = 5000;

// A subject of tokens without wildcards or whitespace.
function validateSubject(value, name, allowEmpty = false) {
  if (value === undefined && allowEmpty) return undefined;
  if (typeof value !== 'string' || value.length === 0 || /[\s*>]/.test(value) ||
      value.startsWith('.') || value.endsWith('.') || value.includes('..')) {
    throw invalidArg(`${name} must be a NATS subject without wildcards or spaces, got ${String(value)}`);
  }
  return value;
}

function channelOptions(options, serialization, handle, peer) {
  return {
    serialization,
    maxMessageSize: options.maxMessageSize,
    highWaterMark: options.highWaterMark,
    // Also bounds what is kept for publishing while the client reconnects.
    maxQueuedBytes: options.maxQueuedBytes,
    requestTimeout: options.requestTimeout,
    transport: 'nats',
    peer,
    createHandle: (callbacks) => handle.attach(callbacks),
  };
}

function handleOptions(options, serialization) {
  const heartbeat = validateSize(options.heartbeat, 'heartbeat', DEFAULT_HEARTBEAT, 2 ** 31 - 1);
  return {
    serialization,
    maxMessageSize: validateSize(options.maxMessageSize, 'maxMessageSize', DEFAULT_MAX_MESSAGE_SIZE),
    heartbeat,
    peerTimeout: validateSize(options.peerTimeout, 'peerTimeout', heartbeat * 4, 2 ** 31 - 1),
  };
}

module.exports = {
  channelOptions, handleOptions, validateSubject, DEFAULT_PREFIX, DEFAULT_QUEUE,
};
