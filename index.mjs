// ESM entry: the same objects as the CommonJS entry.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const procwire = require('./lib/index.js');

export default procwire;
export const {
  codec, Framer, Channel, Server, fork, listen, connect, errors, codes, native,
} = procwire;
// A getter on the CommonJS object: read it when asked, not at import time.
export function getParent() {
  return procwire.parent;
}
