'use strict';
// Several values in one message, each as if sent on its own.
//
// The pool sends the tasks of a tick as one array ([BATCH, id, task, name,
// ...]) and a worker its answers the same way, to pay one message's cost
// for many. Written as one V8 value, an object met twice becomes one object
// at the peer (the serializer writes a back-reference), so two run() calls
// given the same object, or objects sharing a part, would hand the worker a
// single object to mutate; two separate sends never share anything.
//
// An array marked here is written by the advanced format's JavaScript
// encoder with no back-reference from one group of `stride` elements to
// another (from index 1; index 0 is the message's own tag): each group's
// objects are written afresh, as V8 writes distinct objects, so the bytes
// are what v8.serialize gives for the same array of copies. V8's own
// serializer, where that encoder declines (a Map in a task, a view for
// shared memory), cannot write that, so every path to it refuses a marked
// message first (refuseSeparated: the channel's writer before the addon
// encodes, ./index.js, the fallback's codec, the TLS handle), and the sender
// sends the values one by one instead. The JSON format shares nothing
// anyway, so it takes marked messages as they are.

const { isProxy } = require('util').types;
const ObjectGetOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
const { makeError } = require('../errors');

const kSeparateElements = Symbol('procwire.separateElements');

// Marks `array` -> array. The array is lib's own: built by the caller with
// a literal and push, and never handed to user code, so the encoder takes
// its elements for data properties without asking V8 about each (it still
// declines a hole). stride >= 1.
function separateElements(array, stride) {
  array[kSeparateElements] = stride;
  return array;
}

// The stride `message` was marked with, or 0. Runs no user code: a proxy
// (even a revoked one, which Array.isArray throws on) is never a marked
// message, and only the array's own property is looked at, so a proxy on
// its prototype chain is never asked.
function separationOf(message) {
  if (isProxy(message) || !Array.isArray(message)) return 0;
  const own = ObjectGetOwnPropertyDescriptor(message, kSeparateElements);
  return own === undefined ? 0 : own.value;
}

// Throws (coded) when `message` is marked: for the paths to V8's serializer.
function refuseSeparated(message) {
  if (separationOf(message) !== 0) {
    throw makeError('ERR_PROCWIRE_UNSERIALIZABLE', 'the values cannot be sent as one message; send them one by one');
  }
}

module.exports = { kSeparateElements, separateElements, separationOf, refuseSeparated };
