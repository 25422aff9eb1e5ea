'use strict';
// Parsing of send()'s options: which argument is the options object, and
// which buffers a transfer list may hand over.

const { makeError } = require('../errors');
const { invalidArg } = require('../validate');

// The second argument of send() is Node's sendHandle position; a plain
// options object ({ transfer }) there is procwire's send options.
function isSendOptions(value) {
  if (value === null || typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

// Whether an ArrayBuffer may be Node's shared Buffer pool (Buffer.from,
// Buffer.allocUnsafe and friends slice small Buffers out of it): the current
// pool, or one of the pool's size that earlier small Buffers may still share.
function mayBePooled(ab) {
  return ab.byteLength === Buffer.poolSize || Buffer.allocUnsafe(1).buffer === ab;
}

// Buffers and views stand for their ArrayBuffer; each is listed once. Only
// memory the sender owns alone is handed over (detached): a view that does
// not cover its whole ArrayBuffer, or an ArrayBuffer that may be Node's
// Buffer pool, is shared with other Buffers, so it is left out of the list
// and its bytes are copied as for any other message; detaching it would
// empty unrelated Buffers and break every later Buffer.allocUnsafe.
// `what` names the list in errors, as the caller's user wrote it.
function transferList(list, what = 'options.transfer') {
  if (!Array.isArray(list)) throw invalidArg(`${what} must be an array`);
  const out = [];
  for (const item of list) {
    let ab;
    if (item instanceof ArrayBuffer) {
      ab = item;
    } else if (ArrayBuffer.isView(item) && item.buffer instanceof ArrayBuffer) {
      ab = item.buffer;
      if (item.byteOffset !== 0 || item.byteLength !== ab.byteLength) continue;
    } else {
      throw invalidArg(`${what} holds only ArrayBuffers, Buffers and typed arrays` +
        (typeof MessagePort === 'function' && item instanceof MessagePort
          ? ': a MessagePort belongs to one process and cannot be handed to another' : ''));
    }
    if (mayBePooled(ab)) continue;
    if (!out.includes(ab)) out.push(ab);
  }
  return out;
}

// send()'s options -> the transfer list, or undefined. Refused before
// anything is detached: the encoder detaches while encoding, and the size
// check after it would come too late.
function parseTransfer(options, maxMessageSize) {
  if (!options || options.transfer === undefined) return undefined;
  const transfer = transferList(options.transfer);
  let bytes = 0;
  for (const ab of transfer) bytes += ab.byteLength;
  if (bytes > maxMessageSize) {
    throw makeError('ERR_PROCWIRE_MESSAGE_TOO_LARGE',
      `transferred buffers of ${bytes} bytes exceed maxMessageSize (${maxMessageSize} bytes); nothing was sent`);
  }
  return transfer;
}

module.exports = { isSendOptions, mayBePooled, transferList, parseTransfer };
