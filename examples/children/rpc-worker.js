'use strict';
// The whole worker: a responder on the channel to the parent.
const { parent } = require('procwire');

const ops = {
  sum: (...xs) => xs.reduce((a, b) => a + b, 0),
  upper: (s) => s.toUpperCase(),
  divide: (a, b) => {
    if (b === 0) throw new RangeError('division by zero');
    return a / b;
  },
};

parent.respond(async ({ op, args }) => ops[op](...args));
