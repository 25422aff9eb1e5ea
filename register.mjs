// ESM entry of procwire/register, for `node --import procwire/register`:
// the same hook as `--require procwire/register` (lib/register.js), which
// also brings the ES module view of child_process up to date.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
export const { registered } = require('./lib/register.js');
