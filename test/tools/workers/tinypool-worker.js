'use strict';
// A tinypool worker: the task is named by `name` in run()'s options; the
// argument array is spread into it.
const tasks = require('./tasks');

for (const name of Object.keys(tasks)) module.exports[name] = (args) => tasks[name](...args);
