'use strict';
// Two ends of a named channel in this process: a server, its accepted end,
// and the connected client. Options go to both listen() and connect().

const crypto = require('crypto');
const { once } = require('events');
const procwire = require('../..');
const { withTimeout } = require('./wait');

function uniqueName(prefix = 'p') {
  return `${prefix}-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
}

async function namedPair(options = {}) {
  const name = uniqueName();
  const server = procwire.listen(name, options);
  let client = null;
  let serverSide;
  try {
    await server.ready;
    const accepted = once(server, 'channel');
    client = await procwire.connect(name, options);
    [serverSide] = await withTimeout(accepted, 10_000, 'the accepted end of the pair');
  } catch (err) {
    // The caller gets no pair to close: what was opened is closed here.
    if (client !== null) client.destroy();
    server.close();
    throw err;
  }
  return {
    server, client, serverSide, name,
    close() { client.destroy(); serverSide.destroy(); server.close(); },
  };
}

module.exports = { namedPair, uniqueName };
