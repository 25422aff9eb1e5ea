'use strict';
// The pool suite's task in a workerpool worker (workerType 'process').
const path = require('path');
const workerpool = require(require.resolve('workerpool', { paths: [path.join(__dirname, '..', '..', '.bench-deps')] }));
const task = require('./pool-task');

workerpool.worker({ task });
