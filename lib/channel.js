'use strict';
// The Channel lives in lib/channel/; this file keeps require('./channel')
// and require('procwire/lib/channel') where they were.
module.exports = require('./channel/index');
