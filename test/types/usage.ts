// Compiled (not run) by test/types.test.js in a project holding only
// procwire and @types/node: the API as a TypeScript user writes it must
// type-check against index.d.ts under --strict.
import * as procwire from 'procwire';
import type { Channel, ChannelStats, ProcwireError, CloseReason, ErrorCode, Server, PoolStats } from 'procwire';
import { Pool as SubpathPool, move } from 'procwire/pool';

async function main(): Promise<void> {
  const frame: Buffer = procwire.codec.advanced.encode({ a: 1 });
  const value: unknown = procwire.codec.json.decode(frame.subarray(0, frame.length - 1));
  const framer = new procwire.Framer({ serialization: 'advanced', maxMessageSize: 1 << 20, onError: (e: ProcwireError) => e.code });
  const messages: any[] = framer.push(frame);
  const buffered: number = framer.buffering;

  const child = procwire.fork('./child.js', ['x'], { serialization: 'json', child: 'procwire', requestTimeout: 5000 });
  child.send({ hello: 'world' });
  const reply: { ok: boolean } = await child.request<{ ok: boolean }>({ q: 1 }, { timeout: 100 });
  // null once disconnected, as child_process.
  const ch: Channel = child.channel!;
  const fd: number | undefined = child.channel!.fd;
  void fd;
  const cluster = procwire.cluster;
  if (cluster.isPrimary) cluster.fork();
  const forever: unknown = await child.request('x', { timeout: 0, signal: AbortSignal.timeout(10) });
  void forever;
  ch.on('close', (reason: CloseReason, err?: ProcwireError) => { void reason; void err; });
  ch.on('message', (m) => void m);
  const stats: ChannelStats | null = ch.stats();
  const isChannel: boolean = ch instanceof procwire.Channel;
  const timeoutMs: number = ch.requestTimeout;

  const server: Server = procwire.listen('name', { allowUids: [1000] }, (c: Channel) => c.respond(async (v) => v));
  await server.ready;
  const tcp = procwire.listen({ port: 0, host: '127.0.0.1' }, { secret: 'x'.repeat(32), tls: { key: 'k', cert: 'c' } });
  const client: Channel = await procwire.connect({ port: 1234 }, { secret: 'x'.repeat(32), helloTimeout: 1000, tls: { ca: 'pem' } });
  const nats: Channel = await procwire.connect('nats://127.0.0.1:4222', { subject: 'jobs' });
  await nats.request({ job: 1 }, { timeout: 2000, retries: 3 });
  const durable = await procwire.connect('nats://127.0.0.1:4222', { subject: 'jobs', durable: true, credentials: { token: 't' } });
  const dup: number = durable.stats().duplicatesSuppressed + durable.stats().redeliveries;
  procwire.listen('nats://127.0.0.1:4222', { subject: 'jobs', durable: true, concurrency: 4, ackWait: 1000 }, (w) => {
    w.respond(async () => dup);
  });
  client.send('x', (err) => void err);
  const big = procwire.alloc(1 << 20);
  client.send({ big }, { transfer: [big] });
  const ok: boolean = client.send({ big: Buffer.alloc(1) });
  const parent: Channel | null = procwire.parent;
  const same: Channel | null = procwire.getParent();
  if (parent !== null) parent.respond(async (v: { n: number }) => v.n * 2);
  const code: ErrorCode = procwire.errors.RequestTimeoutError.code;
  const codes: ErrorCode[] = procwire.codes;
  const native: boolean = procwire.native;
  try {
    await client.request(1);
  } catch (err) {
    if (err instanceof procwire.errors.RequestTimeoutError) {
      const c: 'ERR_PROCWIRE_REQUEST_TIMEOUT' = err.code;
      void c;
    }
  }
  void [value, messages, buffered, reply, forever, stats, isChannel, timeoutMs, tcp, ok, same, code, codes, native];
  server.close();
}
void main;

// procwire.Pool with typed tasks and results, and procwire/pool.
async function pools(): Promise<void> {
  const pool = new procwire.Pool<{ a: number; b: number }, number>({
    filename: './add.js', minWorkers: 1, maxWorkers: 2, concurrentTasksPerWorker: 64, maxQueue: 'auto',
    resourceLimits: { maxOldGenerationSizeMb: 64 }, idleTimeout: 500, execPath: process.execPath,
  });
  const sum: number = await pool.run({ a: 1, b: 2 }, { timeout: 100, signal: AbortSignal.timeout(50), name: 'add' });
  const stats: PoolStats = pool.stats();
  const p99: number = stats.runTime.p99 + stats.waitTime.p999;
  pool.on('drain', () => void pool.queueSize);
  const missing = await pool.run({ a: 1, b: 2 }, { name: 'nope' }).catch((err: ProcwireError) => err.taskName);
  const limits: number = pool.options.maxWorkers + pool.options.maxQueue;
  const module: string = pool.options.filename;
  await pool.close();
  const big = new SubpathPool<Buffer, Buffer>({ filename: new URL('file:///work/big.js') });
  const back: Buffer = await big.run(move(procwire.alloc(1 << 20)));
  const alsoMoved = SubpathPool.move(Buffer.alloc(4));
  const listed = procwire.alloc(16);
  const viaList: Buffer = await big.run(listed, { transferList: [listed] });
  await big.close({ force: true });
  await big.destroy();
  const disposed: Promise<void> = big[Symbol.asyncDispose]();
  void [sum, p99, back, alsoMoved, missing, limits, module, viaList, disposed];
}
void pools;
