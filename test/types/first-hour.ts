// A new user's first hour, as written from README.md and docs/guide.md:
// fork with a typed channel, send with a transfer (with and without a
// handle), request/respond, listen/connect with a secret, stats and errors.
// test/types.test.js compiles it under --strict, without skipLibCheck,
// against the latest typescript and every @types/node major.
import * as procwire from 'procwire';
import type { Channel, ProcwireError, TcpServerAddress } from 'procwire';

interface Job { n: number }
interface Done { doubled: number }

async function firstHour(): Promise<void> {
  // Fork: the child answers Jobs with Dones.
  const child = procwire.fork<Done, Job>('./worker.js', { child: 'procwire', serialization: 'advanced' });
  const done: Done = await child.request({ n: 21 });
  const other = await child.request<{ raw: true }>({ n: 1 }, { timeout: 5000 });
  child.on('exit', (code: number | null, signal: NodeJS.Signals | null) => void [code, signal]);

  // Send with a transfer, as child_process with a handle slot of null.
  const buf = procwire.alloc(1 << 20);
  child.send({ n: 2 }, null, { transfer: [buf] });
  child.send({ n: 3 }, { transfer: [procwire.alloc(16)] }, (err: Error | null) => void err);

  // The child's side (in worker.js): requireParent() or a null check.
  const parent = procwire.parent;
  if (parent) parent.respond((job: Job): Done => ({ doubled: job.n * 2 }));
  if (procwire.parent !== null) procwire.requireParent<Job, Done>().respond((job) => ({ doubled: job.n * 2 }));

  // listen/connect over TCP with a shared secret.
  const secret = 'correct horse battery staple 1234';
  const server = procwire.listen({ port: 0, host: '127.0.0.1' }, { secret }, (ch: Channel) => {
    ch.respond(async (v: unknown) => v);
  });
  await server.ready;
  const { port }: TcpServerAddress = server.address();
  const client = await procwire.connect<Done, Job>({ port, host: '127.0.0.1' }, { secret });
  const viaTcp: Done = await client.request({ n: 4 });
  client.on('message', (m: Done) => void m.doubled);

  // A named unix channel tells its path.
  const named = procwire.listen('first-hour');
  const path: string = named.address().path;

  // Stats and errors.
  const stats = client.stats();
  if (stats) void [stats.messagesOut, stats.bytesIn, stats.rings.enabled, stats.outOfLine.bytesOut];
  try {
    await client.request({ n: 5 }, { timeout: 10, signal: AbortSignal.timeout(100) });
  } catch (err) {
    if (err instanceof procwire.errors.RequestTimeoutError) void err.code;
    else if (err instanceof procwire.errors.ChannelClosedError) void [err.reason, err.pid, err.exitCode, err.signalCode, err.stderr];
    else if (err instanceof procwire.errors.ConnectError) void [err.address, err.port, err.syscallCode];
    else throw err;
  }
  child.channel?.on('close', (reason, err?: ProcwireError) => void [reason, err?.code]);
  const cluster = procwire.getCluster();
  if (cluster.isPrimary) void cluster.workers;
  void [done, other, viaTcp, path];
  client.close();
  server.close();
  named.close();
  child.kill();
}
void firstHour;
