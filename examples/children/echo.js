'use strict';
// Sends every message straight back.
const { parent } = require('procwire');

parent.on('message', (m) => parent.send(m));
