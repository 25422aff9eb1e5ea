// Compiled (not run) by test/types.test.js: the API as a TypeScript user
// writes it must type-check against index.d.ts.
import * as procwire from '../../index';
import type { Channel, ChannelStats, ProcwireError, CloseReason } from '../../index';

async function main(): Promise<void> {
  const frame: Buffer = procwire.codec.advanced.encode({ a: 1 });
  const value: unknown = procwire.codec.json.decode(frame.subarray(0, frame.length - 1));
  const framer = new procwire.Framer({ serialization: 'advanced', maxMessageSize: 1 << 20, onError: (e: ProcwireError) => e.code });
  const messages: any[] = framer.push(frame);
  const buffered: number = framer.buffering;

  const child = procwire.fork('./child.js', ['x'], { serialization: 'json', child: 'procwire' });
  child.send({ hello: 'world' });
  const reply: { ok: boolean } = await child.request<{ ok: boolean }>({ q: 1 }, { timeout: 100 });
  // null once disconnected, as child_process.
  const ch: Channel = child.channel!;
  const fd: number | undefined = child.channel!.fd;
  void fd;
  const cluster = procwire.cluster;
  if (cluster.isPrimary) cluster.fork();
  ch.on('close', (reason: CloseReason, err?: ProcwireError) => { void reason; void err; });
  ch.on('message', (m) => void m);
  const stats: ChannelStats | null = ch.stats();

  const server = procwire.listen('name', { allowUids: [1000] }, (c: Channel) => c.respond(async (v) => v));
  await server.ready;
  const tcp = procwire.listen({ port: 0, host: '127.0.0.1' }, { secret: 'x'.repeat(32), tls: { key: 'k', cert: 'c' } });
  const client: Channel = await procwire.connect({ port: 1234 }, { secret: 'x'.repeat(32), helloTimeout: 1000, tls: { ca: 'pem' } });
  client.send('x', (err) => void err);
  const big = procwire.alloc(1 << 20);
  client.send({ big }, { transfer: [big] });
  const ok: boolean = client.send({ big: Buffer.alloc(1) });
  const parent: Channel | null = procwire.parent;
  const code: procwire.ErrorCode = procwire.errors.RequestTimeoutError.code;
  void [value, messages, buffered, reply, stats, tcp, ok, parent, code];
  server.close();
}
void main;
