'use strict';
// A workerpool process worker offering the shared tasks.
const { tool } = require('../helpers');

tool('workerpool').worker(require('./tasks'));
