'use strict';
// The hello and key files live in lib/security/; this file keeps
// require('procwire/lib/auth') (the tests use it) where it was.
module.exports = require('./security');
