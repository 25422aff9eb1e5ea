'use strict';
// Argument checks shared by the API. The addon CHECKs what these promise.

const { makeError, invalidArg } = require('./errors');
const { codecFor, codecNames } = require('./codec');
// Chromium's limit for one IPC message, and procwire's default.
const { DEFAULT_MAX_MESSAGE_SIZE } = require('./protocol');
// The largest length a u32 header can state.
const MAX_FRAME_PAYLOAD = 0xffffffff;

function validateSerialization(value, name = 'serialization') {
  if (value === undefined) return 'advanced';
  if (typeof value !== 'string' || codecFor(value) === undefined) {
    throw invalidArg(`${name} must be ${codecNames().map((n) => `"${n}"`).join(' or ')}, got ${String(value)}`);
  }
  return value;
}

function validateSize(value, name, fallback, max = Number.MAX_SAFE_INTEGER) {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > max) {
    throw invalidArg(`${name} must be an integer from 0 to ${max}, got ${String(value)}`);
  }
  return value;
}

function validateMaxMessageSize(value) {
  return validateSize(value, 'maxMessageSize', DEFAULT_MAX_MESSAGE_SIZE, MAX_FRAME_PAYLOAD);
}

function validateObject(value, name) {
  if (value === undefined) return {};
  if (value === null || typeof value !== 'object') throw invalidArg(`${name} must be an object`);
  return value;
}

function validateFunction(value, name) {
  if (typeof value !== 'function') throw invalidArg(`${name} must be a function`);
  return value;
}

// Node's process.send refuses these top-level values, in either mode; so do we,
// with a coded error, so both ends agree on what can be sent.
function validateMessage(message) {
  if (message === undefined) {
    throw makeError('ERR_PROCWIRE_INVALID_MESSAGE', 'message must not be undefined');
  }
  const t = typeof message;
  if (t !== 'string' && t !== 'object' && t !== 'number' && t !== 'boolean') {
    throw makeError('ERR_PROCWIRE_INVALID_MESSAGE',
      `message must be a string, object, number or boolean, got ${t}`);
  }
}

module.exports = {
  DEFAULT_MAX_MESSAGE_SIZE,
  MAX_FRAME_PAYLOAD,
  invalidArg,
  validateSerialization,
  validateSize,
  validateMaxMessageSize,
  validateObject,
  validateFunction,
  validateMessage,
};
