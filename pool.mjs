// ESM entry of procwire/pool: the CommonJS objects themselves.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const pool = require('./lib/pool/index.js');

export const { Pool, move } = pool;
