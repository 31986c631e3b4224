// npm run bench, compression part: where compressing a JSON answer pays. The service as
// `npm start` runs it (on core 0; wrk on core 1), 100 pets, `GET /pets?limit=N` for
// bodies from about 100 bytes to 7 KB, each asked plainly, with `Accept-Encoding: gzip`
// and with `br`, in interleaved rounds. For each size and coding: the bytes sent and the
// service's CPU per request (/proc/PID/stat). Compressing costs the CPU difference and
// saves the bytes' time on the client's link: it pays where that time, at
// BENCH_LINK_MBITS (100 Mbit/s by default), is more than the CPU. Prints the smallest body
// where it pays for both codings, against server/pipeline/compress.ts's minBytes. Exits 0
// whatever it finds. BENCH_SKIP_COMPRESSION=1 skips it.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { get } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { minBytes } from '../../server/pipeline/compress';
import { builtService, clockTicks, customerKey, freePort, median, num, stat } from './common';
import { canPin, ensureWrk, wrk } from './wrk';

const root = join(__dirname, '..', '..');
const seconds = num('BENCH_COMPRESSION_SECONDS', 3);
const rounds = num('BENCH_COMPRESSION_ROUNDS', 3);
const linkMbits = num('BENCH_LINK_MBITS', 100);
const limits = [1, 3, 6, 12, 25, 50, 100];
const codings = ['identity', 'gzip', 'br'] as const;
const password = 'a long bench password';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function startService(databasePath: string): Promise<{ port: number; child: ChildProcess }> {
  const port = await freePort();
  const command = [...(canPin ? ['taskset', '-c', '0'] : []), ...builtService];
  const child = spawn(command[0] as string, command.slice(1), {
    cwd: root,
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      DATABASE_PATH: databasePath,
      RATE_LIMIT_PER_MINUTE: String(1_000_000),
      SHUTDOWN_DELAY_MS: '0',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  for (let i = 0; i < 600 && child.exitCode === null; i++) {
    const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return { port, child };
    await sleep(50);
  }
  child.kill('SIGKILL');
  throw new Error('the service did not become ready');
}

/** An admin from the command line, 100 pets in a category of their own, and its id. */
async function catalogue(base: string, databasePath: string): Promise<number> {
  await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', 'scripts/account-create.ts', '--email', 'squeeze@example.com', `--password=${password}`, '--admin', '--exists-ok'],
    { cwd: root, env: { ...process.env, DATABASE_PATH: databasePath } },
  );
  const made = await fetch(`${base}/api-keys`, {
    method: 'POST',
    headers: { Authorization: `Basic ${Buffer.from(`squeeze@example.com:${password}`).toString('base64')}` },
  });
  const headers = { Authorization: `Bearer ${((await made.json()) as { key: string }).key}`, 'Content-Type': 'application/json' };
  const category = (await (await fetch(`${base}/categories`, { method: 'POST', headers, body: '{"name":"Squeezed"}' })).json()) as {
    id: number;
  };
  for (let i = 0; i < 100; i++) {
    const body = JSON.stringify({ name: `A pet with a name of average length ${i}`, categoryId: category.id });
    const res = await fetch(`${base}/pets`, { method: 'POST', headers, body });
    if (res.status !== 201) throw new Error(`POST /pets answered ${res.status}`);
  }
  return category.id;
}

function bodyBytes(port: number, path: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    get({ host: '127.0.0.1', port, path, headers, agent: false }, (res) => {
      let n = 0;
      res.on('data', (chunk: Buffer) => (n += chunk.length));
      res.on('end', () => resolve(n));
    }).on('error', reject);
  });
}

export async function benchCompression(): Promise<void> {
  ensureWrk();
  const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-compression-'));
  const databasePath = join(dir, 'squeeze.db');
  const { port, child } = await startService(databasePath);
  try {
    const base = `http://127.0.0.1:${port}`;
    const categoryId = await catalogue(base, databasePath);
    const auth = `Bearer ${await customerKey(base, 'squeezed@example.com')}`;
    const path = (limit: number) => `/pets?categoryId=${categoryId}&limit=${limit}`;
    const bytes = new Map<string, number>();
    for (const limit of limits) {
      for (const coding of codings) {
        // node:http, which neither asks for a coding nor decodes one: the bytes as sent.
        const headers = { Authorization: auth, ...(coding !== 'identity' && { 'Accept-Encoding': coding }) };
        bytes.set(`${limit}|${coding}`, await bodyBytes(port, path(limit), headers));
      }
    }
    const cpu = new Map<string, number[]>();
    const run = async (limit: number, coding: (typeof codings)[number], s: number) => {
      const before = stat(child.pid!)!;
      const result = await wrk(
        port,
        [{ path: path(limit), headers: { Authorization: auth, ...(coding !== 'identity' && { 'Accept-Encoding': coding }) } }],
        { connections: 8, seconds: s, ...(canPin && { core: 1 }) },
      );
      const after = stat(child.pid!)!;
      // Socket errors (wrk's timeouts on a stalled machine) leave the answered requests' CPU as it is; a refusal would not.
      if (result.non2xx > 0) throw new Error(`GET ${path(limit)}: ${result.non2xx} answers not 2xx`);
      return (after.own - before.own) / clockTicks / result.requests;
    };
    for (const limit of limits) for (const coding of codings) await run(limit, coding, 1); // warm-up
    for (let round = 0; round < rounds; round++) {
      for (const limit of limits) {
        // Each round starts with another coding, so none always follows the same one.
        for (let i = 0; i < codings.length; i++) {
          const coding = codings[(i + round) % codings.length]!;
          const key = `${limit}|${coding}`;
          cpu.set(key, [...(cpu.get(key) ?? []), await run(limit, coding, seconds)]);
        }
      }
    }
    const wireUsPerByte = 8 / linkMbits; // µs a byte takes at linkMbits
    console.log(
      `\nCompression of JSON answers: GET /pets?limit=N, wrk 8 connections${canPin ? ' on core 1, the service on core 0' : ''}, ` +
        `${rounds} interleaved rounds of ${seconds} s; pays where the bytes saved take longer at ${linkMbits} Mbit/s than the CPU it costs\n`,
    );
    console.log('| N | bytes: plain, gzip, br | CPU per request: plain, gzip, br | CPU added: gzip, br | wire time saved: gzip, br |');
    console.log('|---|---|---|---|---|');
    const pays: Record<'gzip' | 'br', number[]> = { gzip: [], br: [] };
    for (const limit of limits) {
      const b = (c: string) => bytes.get(`${limit}|${c}`) ?? NaN;
      const us = (c: string) => median(cpu.get(`${limit}|${c}`) ?? []) * 1e6;
      const added = (c: 'gzip' | 'br') => us(c) - us('identity');
      const saved = (c: 'gzip' | 'br') => (b('identity') - b(c)) * wireUsPerByte;
      for (const c of ['gzip', 'br'] as const) if (saved(c) > 0 && saved(c) > added(c)) pays[c].push(b('identity'));
      console.log(
        `| ${limit} | ${b('identity')}, ${b('gzip')}, ${b('br')} | ${us('identity').toFixed(0)}, ${us('gzip').toFixed(0)}, ${us('br').toFixed(0)} µs | ` +
          `${added('gzip').toFixed(0)}, ${added('br').toFixed(0)} µs | ${saved('gzip').toFixed(0)}, ${saved('br').toFixed(0)} µs |`,
      );
    }
    const smallest = Math.max(Math.min(...pays.gzip), Math.min(...pays.br));
    const verdict = Number.isFinite(smallest)
      ? minBytes >= smallest * 0.5 && minBytes <= smallest * 2
        ? 'met'
        : 'NOT met'
      : 'not measured';
    console.log(
      `\nSmallest body where both pay: ${Number.isFinite(smallest) ? `${smallest} bytes` : '-'}; minBytes ${minBytes} ` +
        `(target: within a factor of 2 of it) ${verdict}\n`,
    );
  } finally {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  benchCompression().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
