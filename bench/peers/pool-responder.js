'use strict';
// The pool suite's bare baseline: a procwire child answering request()s
// with the same task function the pools run.
const path = require('path');
const { parent } = require(path.join(__dirname, '..', '..'));
parent.respond(require('./pool-task'));
