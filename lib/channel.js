'use strict';
// The Channel lives in lib/channel/; this file keeps the old require path
// (lib/channel.js) working for the modules and tests that use it.
module.exports = require('./channel/index');
