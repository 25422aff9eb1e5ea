'use strict';
// procwire/pool: a process pool on procwire channels (docs/pool.md).
const { Pool } = require('./pool');
const { move } = require('./move');

module.exports = { Pool, move };
