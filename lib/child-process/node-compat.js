'use strict';
// Node's checks and errors on the ChildProcess surface: send()'s
// arguments, ERR_IPC_CHANNEL_CLOSED instead of procwire's closed-channel
// code, and the serializer's own error for a value Node cannot send.

const util = require('util');
const { nodeError } = require('../errors');

// The options of send(message) without any: Node's defaults, shared and
// frozen (nothing downstream writes to options).
const DEFAULT_SEND_OPTIONS = Object.freeze({ swallowErrors: false });

// Node's checks on send(message, handle, options, callback) -> the
// normalised [handle, options, callback].
function normalizeSendArgs(handle, options, callback) {
  if (typeof handle === 'function') {
    callback = handle;
    handle = undefined;
    options = undefined;
  } else if (typeof options === 'function') {
    callback = options;
    options = undefined;
  } else if (options !== undefined && (options === null || typeof options !== 'object' || Array.isArray(options))) {
    throw nodeError('ERR_INVALID_ARG_TYPE', 'options', 'of type object', options);
  }
  return [handle, { swallowErrors: false, ...options }, callback];
}

function checkMessage(message) {
  if (message === undefined) throw nodeError('ERR_MISSING_ARGS', 'message');
  const type = typeof message;
  if (type !== 'string' && type !== 'object' && type !== 'number' && type !== 'boolean') {
    throw nodeError('ERR_INVALID_ARG_TYPE', 'message', 'one of type string, object, number, or boolean', message);
  }
}

// On the child_process surface a closed channel is Node's
// ERR_IPC_CHANNEL_CLOSED, not procwire's code.
const kNodeFacing = Symbol('nodeFacing');
function nodeFacing(err) {
  return err && err.code === 'ERR_PROCWIRE_CHANNEL_CLOSED' ? nodeError('ERR_IPC_CHANNEL_CLOSED') : err;
}

// Node's send() throws its serializer's own error for a value it cannot
// send: JSON.stringify's TypeError in json mode (a BigInt, a cycle), V8's
// DataCloneError in advanced mode (a function, a symbol). procwire's codec
// reports ERR_PROCWIRE_UNSERIALIZABLE instead; on this cold path the Node-facing
// surface runs the serializer Node would have run, so the thrown error is
// Node's exactly. A value Node's serializer takes keeps procwire's error.
function nodeSerializationError(err, message, serialization) {
  try {
    if (serialization === 'json') {
      JSON.stringify(message);
    } else {
      const serializer = new (require('v8').Serializer)();
      serializer.writeHeader();
      serializer.writeValue(message);
    }
  } catch (nodeErr) {
    return nodeErr;
  }
  return err;
}

// Node 20-24 keep `_channel` as an alias of `channel`, deprecated (DEP0129)
// with the same warning.
function defineLegacyChannelAlias(child) {
  const message = '_channel is deprecated. Use ChildProcess.channel instead.';
  Object.defineProperty(child, '_channel', {
    get: util.deprecate(() => child.channel, message, 'DEP0129'),
    set: util.deprecate((value) => { child.channel = value; }, message, 'DEP0129'),
    configurable: true,
    enumerable: false,
  });
}

module.exports = {
  DEFAULT_SEND_OPTIONS, normalizeSendArgs, checkMessage, kNodeFacing, nodeFacing, nodeSerializationError,
  defineLegacyChannelAlias,
};
