// Passwords: new ones hashed with argon2id from node:crypto and stored as PHC strings;
// a stored string is verified with the algorithm and parameters it names (earlier
// releases wrote scrypt), and one that is not today's is replaced after a successful
// login. Hashes run on threads of their own below the event loop's priority; at most
// `concurrency` at once in a process, at most `queue` wait, and the rest are refused with
// 503 `overloaded`. docs/decisions.md, "Passwords".
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { ApiError } from '../../domain/errors';
import { hashWorkerFile } from '../files';

/** What new hashes use: OWASP's minimum for argon2id (19 MiB, 2 passes, 1 lane). */
export const currentParams = { algorithm: 'argon2id', version: 19, memoryKiB: 19_456, passes: 2, parallelism: 1 } as const;
const saltBytes = 16;
const hashBytes = 32;

type Argon2Algorithm = 'argon2id' | 'argon2i' | 'argon2d';

/** A stored hash taken apart: everything needed to compute it again. */
export type ParsedHash =
  | {
      algorithm: Argon2Algorithm;
      version: number;
      memoryKiB: number;
      passes: number;
      parallelism: number;
      salt: Buffer;
      hash: Buffer;
    }
  | { algorithm: 'scrypt'; N: number; r: number; p: number; salt: Buffer; hash: Buffer };

// PHC strings carry base64 without padding; the scrypt strings of earlier releases with it.
const b64 = '[A-Za-z0-9+/]+={0,2}';
const argon2Pattern = new RegExp(`^\\$(argon2id|argon2i|argon2d)\\$v=(\\d+)\\$m=(\\d+),t=(\\d+),p=(\\d+)\\$(${b64})\\$(${b64})$`);
// What releases before argon2 wrote: `scrypt$N$r$p$salt$hash`.
const scryptPattern = new RegExp(`^scrypt\\$(\\d+)\\$(\\d+)\\$(\\d+)\\$(${b64})\\$(${b64})$`);

// A string that asks for more than these is refused rather than computed: a row edited by
// hand, or garbage, must not take a gigabyte or a minute of the thread pool.
const maxMemoryBytes = 1024 * 1024 * 1024;
const inRange = (n: number, min: number, max: number) => Number.isSafeInteger(n) && n >= min && n <= max;

/** The algorithm and parameters a stored string names; null when it is not one we can verify. */
export function parsePasswordHash(stored: string): ParsedHash | null {
  const argon = argon2Pattern.exec(stored);
  if (argon) {
    const [, algorithm, v, m, t, p, salt, hash] = argon as unknown as [
      string,
      Argon2Algorithm,
      string,
      string,
      string,
      string,
      string,
      string,
    ];
    const parsed = {
      algorithm,
      version: Number(v),
      memoryKiB: Number(m),
      passes: Number(t),
      parallelism: Number(p),
      salt: Buffer.from(salt, 'base64'),
      hash: Buffer.from(hash, 'base64'),
    };
    const ok =
      parsed.version === 19 &&
      inRange(parsed.parallelism, 1, 16) &&
      inRange(parsed.memoryKiB, 8 * parsed.parallelism, maxMemoryBytes / 1024) &&
      inRange(parsed.passes, 1, 64) &&
      parsed.salt.length >= 8 &&
      parsed.hash.length >= 16;
    return ok ? parsed : null;
  }
  const legacy = scryptPattern.exec(stored);
  if (legacy) {
    const [, N, r, p, salt, hash] = legacy as unknown as [string, string, string, string, string, string];
    const parsed = {
      algorithm: 'scrypt' as const,
      N: Number(N),
      r: Number(r),
      p: Number(p),
      salt: Buffer.from(salt, 'base64'),
      hash: Buffer.from(hash, 'base64'),
    };
    const ok =
      inRange(parsed.N, 2, 2 ** 24) &&
      (parsed.N & (parsed.N - 1)) === 0 &&
      inRange(parsed.r, 1, 64) &&
      inRange(parsed.p, 1, 16) &&
      128 * parsed.N * parsed.r <= maxMemoryBytes &&
      parsed.salt.length >= 8 &&
      parsed.hash.length >= 16;
    return ok ? parsed : null;
  }
  return null;
}

const phcBase64 = (bytes: Buffer) => bytes.toString('base64').replace(/=+$/, '');

function formatArgon2(salt: Buffer, hash: Buffer): string {
  const { algorithm, version, memoryKiB, passes, parallelism } = currentParams;
  return `$${algorithm}$v=${version}$m=${memoryKiB},t=${passes},p=${parallelism}$${phcBase64(salt)}$${phcBase64(hash)}`;
}

/** Whether a stored hash was made the way new ones are: if not, a successful login replaces it. */
export function isCurrent(parsed: ParsedHash): boolean {
  return (
    parsed.algorithm === currentParams.algorithm &&
    parsed.version === currentParams.version &&
    parsed.memoryKiB === currentParams.memoryKiB &&
    parsed.passes === currentParams.passes &&
    parsed.parallelism === currentParams.parallelism &&
    parsed.salt.length === saltBytes &&
    parsed.hash.length === hashBytes
  );
}

/** What a hashing thread is asked to compute (server/security/hash-worker.cjs). */
interface HashJob {
  algorithm: ParsedHash['algorithm'];
  password: string;
  salt: Buffer;
  length: number;
  scrypt?: { N: number; r: number; p: number; maxmem: number };
  argon2?: { memory: number; passes: number; parallelism: number };
}

/** Below the event loop's priority (0): under contention the loop's requests go first. */
const hashThreadNice = 10;

/**
 * The threads hashes are computed on, started when needed: as many as run at once, which
 * the gate bounds, each ended once it has waited `idleMs` for another hash (a thread holds
 * memory of its own, docs/performance.md "Memory"). A hash on libuv's thread pool (crypto.argon2) would run at the event loop's
 * priority and, on a busy machine, take the CPU from it.
 */
class HashThreads {
  /** Threads waiting for work, the last used last, each with the timer that ends it. */
  private readonly idle: Array<{ worker: Worker; ending: NodeJS.Timeout }> = [];

  private busy = 0;

  constructor(private readonly idleMs: number) {}

  /** Threads alive: at work or waiting for it. */
  get alive(): number {
    return this.busy + this.idle.length;
  }

  private take(): Worker {
    this.busy++;
    const waiting = this.idle.pop();
    if (!waiting) {
      // execArgv: [] so the thread does not inherit the process's preloads or flags.
      return new Worker(hashWorkerFile, { workerData: { nice: hashThreadNice }, execArgv: [] });
    }
    clearTimeout(waiting.ending);
    return waiting.worker;
  }

  private putBack(worker: Worker): void {
    const ending = setTimeout(() => {
      const at = this.idle.findIndex((waiting) => waiting.worker === worker);
      if (at >= 0) this.idle.splice(at, 1);
      void worker.terminate();
    }, this.idleMs);
    ending.unref();
    this.idle.push({ worker, ending });
  }

  async compute(job: HashJob): Promise<Buffer> {
    const worker = this.take();
    // Held while it works, so that a script awaiting a hash does not exit under it.
    worker.ref();
    let usable = true;
    try {
      return await new Promise<Buffer>((resolve, reject) => {
        const done = () => {
          worker.off('message', onMessage);
          worker.off('error', onError);
          worker.off('exit', onExit);
        };
        const onMessage = (answer: { hash?: Uint8Array; error?: string }) => {
          done();
          if (answer.hash) resolve(Buffer.from(answer.hash.buffer, answer.hash.byteOffset, answer.hash.byteLength));
          else reject(new Error(`password hashing failed: ${answer.error}`));
        };
        const onError = (error: Error) => {
          done();
          usable = false;
          reject(error);
        };
        const onExit = (code: number) => {
          done();
          usable = false;
          reject(new Error(`the password hashing thread exited (${code})`));
        };
        worker.on('message', onMessage);
        worker.once('error', onError);
        worker.once('exit', onExit);
        worker.postMessage(job);
      });
    } finally {
      worker.unref();
      this.busy--;
      if (usable) this.putBack(worker);
      else void worker.terminate();
    }
  }
}

/** The hash the parsed string's algorithm and parameters make of `password`, on a hashing thread. */
function derive(threads: HashThreads, password: string, parsed: ParsedHash): Promise<Buffer> {
  const job = { algorithm: parsed.algorithm, password, salt: parsed.salt, length: parsed.hash.length };
  if (parsed.algorithm === 'scrypt') {
    const { N, r, p } = parsed;
    return threads.compute({ ...job, scrypt: { N, r, p, maxmem: 128 * N * r + 128 * r * p + 1024 * 1024 } });
  }
  const { memoryKiB: memory, passes, parallelism } = parsed;
  return threads.compute({ ...job, argon2: { memory, passes, parallelism } });
}

async function hashNow(threads: HashThreads, password: string): Promise<string> {
  const salt = randomBytes(saltBytes);
  const hash = await derive(threads, password, { ...currentParams, salt, hash: Buffer.alloc(hashBytes) });
  return formatArgon2(salt, hash);
}

async function matches(threads: HashThreads, password: string, parsed: ParsedHash): Promise<boolean> {
  const actual = await derive(threads, password, parsed);
  return timingSafeEqual(actual, parsed.hash);
}

export interface PasswordHashingOptions {
  /** Hashes computed at once in this process, each on a thread of its own (about 35 MiB each). */
  concurrency: number;
  /** Hashes that may wait for one of those; past them, 503 `overloaded`. */
  queue: number;
  /** How long a thread waits for another hash before it ends (10 s when not given). */
  threadIdleMs?: number;
}

/** A slot for one hash: `limit` run, `queueLimit` wait in order, the rest are refused. */
export class HashGate {
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(
    readonly limit: number,
    readonly queueLimit: number,
  ) {}

  /** Hashes running now and waiting now. */
  get load(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.waiting.length };
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.running < this.limit) this.running++;
    else if (this.waiting.length < this.queueLimit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else {
      throw new ApiError('overloaded', 'Too many passwords are being checked at once; try again shortly', 503, { 'Retry-After': '1' });
    }
    try {
      return await work();
    } finally {
      // A slot that frees goes to the next in line as it is: `running` counts it still.
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}

export interface PasswordCheck {
  ok: boolean;
  /** After a successful check of a hash not made the way new ones are: its replacement, to store. */
  upgraded: string | null;
}

export interface PasswordHashing {
  /** A new password's hash, as a PHC string. */
  hash(password: string): Promise<string>;
  /**
   * Checks `password` against a stored hash, or, for an unknown account (null), against a
   * decoy of today's kind, so that both answers cost the same.
   */
  verify(password: string, stored: string | null): Promise<PasswordCheck>;
  readonly gate: HashGate;
  /** Hashing threads alive now, at work or waiting for it. */
  readonly threads: number;
}

export function createPasswordHashing({ concurrency, queue, threadIdleMs = 10_000 }: PasswordHashingOptions): PasswordHashing {
  const gate = new HashGate(concurrency, queue);
  const threads = new HashThreads(threadIdleMs);
  // Random bytes in today's format: verifying against it costs what a real check costs.
  const decoy = parsePasswordHash(formatArgon2(randomBytes(saltBytes), randomBytes(hashBytes))) as ParsedHash;
  return {
    gate,
    get threads() {
      return threads.alive;
    },
    hash: (password) => gate.run(() => hashNow(threads, password)),
    verify: (password, stored) =>
      gate.run(async () => {
        const parsed = stored === null ? null : parsePasswordHash(stored);
        // A string we cannot read is checked against the decoy too: it costs what a check costs.
        const matched = await matches(threads, password, parsed ?? decoy);
        const ok = parsed !== null && matched;
        // In the same slot: a login that upgrades holds it for both hashes.
        const upgraded = ok && !isCurrent(parsed) ? await hashNow(threads, password) : null;
        return { ok, upgraded };
      }),
  };
}
