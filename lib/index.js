'use strict';
// procwire: fast, safe message channels between Node.js processes.

const codec = require('./codec');
const { Framer } = require('./framer');
const { Channel } = require('./channel');
const { fork, getParent } = require('./fork');
const { listen, connect, Server } = require('./net');
const errors = require('./errors');

module.exports = {
  codec,
  Framer,
  Channel,
  Server,
  fork,
  listen,
  connect,
  errors: errors.classes,
  codes: Object.keys(errors.CODES),
  native: true,
  get parent() {
    return getParent();
  },
};
