// ESM: every runtime export is importable by name, and the default import is
// the whole API (compiled by test/types.test.js).
import procwire, {
  codec, Framer, Channel, Server, fork, listen, connect, alloc, errors, codes, native, parent, getParent, Pool,
} from 'procwire';
import { Pool as SubpathPool, move } from 'procwire/pool';

const child = fork('./worker.js', { child: 'procwire' });
const sum: number = await child.request<number>({ a: 1, b: 2 });
const buf: Buffer = alloc(4096);
const maybe: Channel | null = parent ?? getParent();
const frame: Buffer = codec.json.encode({ ok: true });
const framer = new Framer({ serialization: 'json' });
const server: Server = listen('jobs', (ch) => ch.respond((v) => v));
const ch: Channel = await connect('jobs');
const same: typeof procwire.fork = fork;
void [sum, buf, maybe, frame, framer, server, ch, same, errors.ChannelClosedError, codes, native];
const { port } = listen({ port: 0 }).address();
const p: number = port;
void p;
const pool: Pool<number, number> = new SubpathPool<number, number>({ filename: './square.js' });
const squared: number = await pool.run(move(3));
void squared;
