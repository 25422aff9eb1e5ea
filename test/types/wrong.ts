// Wrong usages that index.d.ts must refuse: each line below is expected to be
// a type error; test/types.test.js fails if any of them compiles.
import * as procwire from 'procwire';
import { MessageChannel } from 'worker_threads';

// @ts-expect-error Channel is made by fork/listen/connect, not by users.
new procwire.Channel();
// @ts-expect-error Server is made by listen(), not by users.
new procwire.Server();
// @ts-expect-error 'bogus' is not a child mode.
procwire.fork('./child.js', { child: 'bogus' });
// @ts-expect-error 'yaml' is not a serialization.
procwire.fork('./child.js', { serialization: 'yaml' });
// @ts-expect-error timeout is a number of milliseconds.
procwire.fork('./child.js').request(1, { timeout: '5s' });
// @ts-expect-error requestTimeout is a number of milliseconds.
procwire.fork('./child.js', { requestTimeout: '30s' });
// @ts-expect-error there is no yaml codec.
procwire.codec.yaml.encode(1);
// @ts-expect-error the module path is a string or URL.
procwire.fork(42);
// @ts-expect-error not an error code procwire raises.
const code: procwire.ErrorCode = 'ERR_NOPE';
// @ts-expect-error parent is null outside a procwire child: check it first.
procwire.parent.send('x');
// @ts-expect-error alloc takes a size.
procwire.alloc('big');
// @ts-expect-error the secret is a string or Buffer.
procwire.connect({ port: 1 }, { secret: 42 });
void code;
// @ts-expect-error a Pool<Task> takes only its task type.
new procwire.Pool<{ a: number }, number>({ filename: 'x.js' }).run('text');
// @ts-expect-error transferList holds buffers, not a worker thread's MessagePort.
new procwire.Pool({ filename: 'x.js' }).run(1, { transferList: [new MessageChannel().port1] });
// @ts-expect-error execPath is a path.
new procwire.Pool({ filename: 'x.js', execPath: true });
// @ts-expect-error a Pool needs its worker's filename.
new procwire.Pool({ maxWorkers: 2 });
