'use strict';
// Pool.move(value[, transfer]): marks a task or a result whose buffers are
// handed over (transferred) rather than copied, as piscina's move() does.
// A worker returns move(result) to send a procwire.alloc() buffer back
// without a copy. The mark is a brand under a registered symbol, not a
// class, so a worker's module that loaded another copy of procwire still
// makes marks this one knows.

const { isProxy } = require('util').types;
const ObjectGetOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;

const kMoved = Symbol.for('procwire.pool.moved');

// The ArrayBuffers a value holds at its top level: itself, or the views and
// buffers among an array's items or an object's own values.
function transferablesOf(value) {
  if (value instanceof ArrayBuffer || ArrayBuffer.isView(value)) return [value];
  const out = [];
  if (value !== null && typeof value === 'object') {
    for (const item of Array.isArray(value) ? value : Object.values(value)) {
      if (item instanceof ArrayBuffer || ArrayBuffer.isView(item)) out.push(item);
    }
  }
  return out;
}

function move(value, transfer) {
  return { [kMoved]: true, value, transfer: transfer === undefined ? transferablesOf(value) : transfer };
}

// Whether `value` is a move() mark. Runs no user code (the pool asks this
// of every task and a worker of every result): a proxy, even a revoked one,
// is never a mark, and only the value's own data property is looked at, so
// neither a getter nor a proxy on its prototype chain is asked, as
// ../codec/separate.js reads its own mark.
function isMoved(value) {
  if (value === null || typeof value !== 'object' || isProxy(value)) return false;
  const own = ObjectGetOwnPropertyDescriptor(value, kMoved);
  return own !== undefined && own.value === true;
}

module.exports = { move, isMoved };
