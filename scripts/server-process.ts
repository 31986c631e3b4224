// Runs the compiled service (dist/server/main.js, built by the suite's globalSetup) in a
// child process, as `npm start` does, for the tests that need start-up, shutdown or a
// restart on the same database file.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

export const repoRoot = join(__dirname, '..');

export interface ServerProcess {
  /** http://127.0.0.1:<port> */
  url: string;
  child: ChildProcess;
  /** Everything the process wrote to stderr (its JSON log lines) so far. */
  log(): string;
  /** SIGTERM, then waits for the exit (SIGKILL past the deadline); resolves to the exit code. */
  stop(): Promise<number | null>;
}

/**
 * Resolves once the process has exited and its stdout and stderr are read to the end
 * ('close', not 'exit': the last lines it wrote as it exited may still be in the pipe).
 */
function waitForExit(child: ChildProcess, ms: number): Promise<number | null | 'timeout'> {
  const drained = (child.stderr === null || child.stderr.readableEnded) && (child.stdout === null || child.stdout.readableEnded);
  if ((child.exitCode !== null || child.signalCode !== null) && drained) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve('timeout'), ms);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
}

/**
 * The flags the service's node runs with, as package.json's `start` and the Containerfile's
 * ENTRYPOINT pass them: a young generation of 8 MiB semi-spaces, an old generation of at
 * most 1 GiB, which keeps V8 from letting it grow to four times what survives a collection
 * (docs/performance.md, "Memory"), no memory reducer, which shrank the heap in a quiet
 * spell so that the next requests paid to grow it again ("Collections"), and TurboFan on
 * the main thread, whose memory glibc gives back where a compiler thread's stayed ("Idle").
 */
export const serviceNodeFlags = [
  '--max-semi-space-size=8',
  '--max-old-space-size=1024',
  '--no-memory-reducer',
  '--no-concurrent-recompilation',
];

/**
 * Starts the service on an ephemeral port (PORT=0) and resolves once its start-up log
 * line names the address it listens on. `cwd` is the project to run (a test's copy, built).
 */
export function startServer(env: Record<string, string>, timeoutMs = 30_000, cwd = repoRoot): Promise<ServerProcess> {
  // Exactly what `npm start` runs: one node process, so SIGTERM reaches the service itself.
  const child = spawn(process.execPath, [...serviceNodeFlags, 'dist/server/main.js'], {
    cwd,
    // No balancer watches a test's server: it stops without SHUTDOWN_DELAY_MS and is ready
    // without a warm-up (WARM_UP_MS) unless a test asks for them.
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', SHUTDOWN_DELAY_MS: '0', WARM_UP_MS: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stdout?.resume();

  const stop = async () => {
    child.kill('SIGTERM');
    const code = await waitForExit(child, 15_000);
    if (code !== 'timeout') return code;
    child.kill('SIGKILL');
    await waitForExit(child, 5_000);
    throw new Error(`the server did not stop within 15 s of SIGTERM:\n${stderr}`);
  };

  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the server did not start within ${timeoutMs} ms:\n${stderr}`));
    }, timeoutMs);
    let started = false;
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (!started) reject(new Error(`the server exited with ${code} before listening:\n${stderr}`));
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
      // Searched only until found: the whole log again on every chunk made a reader that
      // fell behind a busy service's log, and the service, which writes it in the turn
      // (docs/operations.md, "Running notes"), waited for the reader.
      if (started) return;
      const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr);
      if (!match?.[1]) return;
      started = true;
      clearTimeout(timer);
      resolve({ url: match[1], child, log: () => stderr, stop });
    });
  });
}

/**
 * Runs the service as startServer does, for one that should not start: resolves to its
 * exit code, what it wrote to stderr, and how long it took (SIGKILL past `timeoutMs`).
 */
export function runUntilExit(
  env: Record<string, string>,
  timeoutMs = 30_000,
  cwd = repoRoot,
): Promise<{ code: number | null; stderr: string; ms: number }> {
  const began = Date.now();
  const child = spawn(process.execPath, [...serviceNodeFlags, 'dist/server/main.js'], {
    cwd,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', SHUTDOWN_DELAY_MS: '0', WARM_UP_MS: '0', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve) =>
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, ms: Date.now() - began });
    }),
  );
}

/** Polls `check` every 50 ms until it returns a value other than undefined, for at most `ms`. */
export async function eventually<T>(check: () => Promise<T | undefined> | T | undefined, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`still not there after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
