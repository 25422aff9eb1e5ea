'use strict';
// Two ends of a named channel in this process: a server, its accepted end,
// and the connected client. Options go to both listen() and connect().

const crypto = require('crypto');
const { once } = require('events');
const procwire = require('../..');

function uniqueName(prefix = 'p') {
  return `${prefix}-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
}

async function namedPair(options = {}) {
  const name = uniqueName();
  const server = procwire.listen(name, options);
  await server.ready;
  const accepted = once(server, 'channel');
  const client = await procwire.connect(name, options);
  const [serverSide] = await accepted;
  return {
    server, client, serverSide, name,
    close() { client.destroy(); serverSide.destroy(); server.close(); },
  };
}

module.exports = { namedPair, uniqueName };
