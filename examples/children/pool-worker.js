'use strict';
// One pool worker: counts primes below n (some real CPU work per job).
const { parent } = require('procwire');

const { countPrimes } = require('../lib/primes');

parent.respond(({ n }) => ({ primes: countPrimes(n), pid: process.pid }));
