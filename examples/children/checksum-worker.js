'use strict';
// Sums a few bytes of each buffer it gets (the buffer is backed by the shared
// mapping: nothing was copied to receive it), by request or by message.
const { parent } = require('procwire');

function describe({ data }) {
  let sum = 0;
  for (let i = 0; i < data.length; i += 4096) sum += data[i];
  return { bytes: data.length, sum };
}

parent.respond(describe);
parent.on('message', (m) => parent.send(describe(m)));
