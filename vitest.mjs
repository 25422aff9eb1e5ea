// ESM entry of procwire/vitest (lib/vitest.js): `pool: procwire()` in a
// Vitest 4 config.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
export const { procwire, ProcwirePoolWorker } = require('./lib/vitest.js');
export default procwire;
