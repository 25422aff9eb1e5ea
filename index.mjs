// ESM entry: the same objects as the CommonJS entry, every runtime export by
// name (test/exports.test.js keeps this list, lib/index.js and index.d.ts
// equal).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const procwire = require('./lib/index.js');

export default procwire;
export const {
  codec, Framer, Channel, Server, fork, listen, connect, alloc, release, errors, codes, native, getParent, getCluster,
  requireParent,
  Pool,
} = procwire;
// `cluster` is not read here: reading it loads Node's cluster module (with
// procwire's fork), which an import must not do as a side effect. ESM code
// calls getCluster() instead.
// An ES module cannot export a getter, so `parent` is read once, at import.
// It is null unless this process is a procwire child, and the channel it
// makes keeps the process alive only while it has listeners, a responder or
// requests in flight, as the CommonJS getter's does. Read through that getter,
// so a child forked without { child: 'procwire' } gets the same hint when it
// then uses a null parent.
export const parent = procwire.parent;
