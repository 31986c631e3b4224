// Warm-up before ready: a new instance runs its GET operations in process, through the app
// as a client's request would go (routing, the validator's checks, the handler, the store's
// reads, the answer's serializer), until V8 has compiled them, and only then does /readyz
// say ready: a rolling restart's new instance then serves at full speed from its first
// request (docs/performance.md, "Warm before ready"). These requests take no HTTP
// connection, spend no client's rate-limit budget, write no access line and nothing to
// the store: only reads run, and their mark is a symbol no request from outside can carry.
import { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { Duplex } from 'node:stream';
import type { Request, RequestHandler } from 'express';
import type { OperationEntry } from '../spec';

const mark = Symbol('warm-up');

/** Whether the request is one of the warm-up's own (made in this process, never received). */
export const isWarmUp = (req: Request): boolean => (req as Request & { [mark]?: true })[mark] === true;

/** Until the warm-up is over, /readyz answers 503 (server/app.ts). */
export interface WarmUpState {
  pending: boolean;
  /** One-time set-ups the app would otherwise run within its first request, each run as a step of its own. */
  setUp?: Array<() => Promise<void>>;
}

/**
 * The operations a warm-up runs, as URLs: the GETs but the probes (answered before any
 * operation's chain), each path parameter 1.
 */
export function warmUpUrls(operations: Record<string, OperationEntry>): string[] {
  return Object.values(operations)
    .filter((op) => op.method === 'get' && op.tag !== 'service' && op.security !== 'basic')
    .map((op) => op.path.replace(/\{[^}]+\}/g, '1'));
}

/** One GET through `app`, answered into nothing; resolves with its status once the answer is written. */
function inject(app: RequestHandler, url: string): Promise<number> {
  const socket = new Duplex({
    read() {},
    write(_chunk, _encoding, callback) {
      callback();
    },
  }) as unknown as Socket;
  const req = new IncomingMessage(socket);
  req.method = 'GET';
  req.url = url;
  req.headers = { host: 'localhost', accept: 'application/json' };
  req.httpVersion = '1.1';
  req.httpVersionMajor = 1;
  req.httpVersionMinor = 1;
  (req as unknown as Record<symbol, true>)[mark] = true;
  req.push(null);
  const res = new ServerResponse(req);
  res.assignSocket(socket);
  return new Promise((resolve, reject) => {
    res.once('finish', () => {
      res.detachSocket(socket);
      socket.destroy();
      resolve(res.statusCode);
    });
    (app as unknown as (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => void)(req, res, (err) =>
      reject(err instanceof Error ? err : new Error(`warm-up ${url}: not answered`)),
    );
  });
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/**
 * Two turns of the event loop: a connection accepted in one turn has its request read and
 * answered in the next, so a request that came while a step ran is answered before the
 * step after it (with one turn, it waited for two steps, tens of ms each).
 */
const twoTurns = async () => {
  await nextTurn();
  await nextTurn();
};

async function oneByOne<T>(items: readonly string[], run: (item: string) => Promise<T>): Promise<T[]> {
  const results: T[] = [];
  for (const item of items) {
    await twoTurns();
    results.push(await run(item));
  }
  return results;
}

/**
 * Runs the `setUp` steps, two turns of the event loop before each, then every URL of
 * `urls` through `app` in rounds, a turn of the event loop between
 * rounds (a probe or a client is answered meanwhile). The first round always runs: it
 * compiles each operation's validators, which its first client would otherwise wait for
 * (docs/performance.md, "Warm before ready"). The rounds after it, up to `rounds`, run while less than
 * `budgetMs` has passed since the first ended. Resolves with what it did.
 */
export async function warmUp(
  app: RequestHandler,
  urls: readonly string[],
  { budgetMs, rounds, setUp = [] }: { budgetMs: number; rounds: number; setUp?: ReadonlyArray<() => Promise<void>> },
): Promise<{ rounds: number; requests: number; firstMs: number; ms: number; statuses: Record<string, number> }> {
  const began = performance.now();
  // Each before the first request, which would otherwise run them all in its one step.
  for (const step of setUp) {
    await twoTurns();
    await step();
  }
  const statuses: Record<string, number> = {};
  let done = 0;
  let firstEnded = Infinity;
  while (done < rounds && urls.length > 0 && (done === 0 || performance.now() - firstEnded < budgetMs)) {
    // The first round compiles an operation's validators at each request (tens of ms):
    // one at a time, with turns of the event loop before each, so that a client (a probe,
    // the first request) is answered meanwhile, the first before anything is compiled.
    const answers = done === 0 ? await oneByOne(urls, (url) => inject(app, url)) : await Promise.all(urls.map((url) => inject(app, url)));
    for (const status of answers) statuses[status] = (statuses[status] ?? 0) + 1;
    if (done++ === 0) firstEnded = performance.now();
    await nextTurn();
  }
  const ms = (at: number) => Math.round(at - began);
  return {
    rounds: done,
    requests: done * urls.length,
    firstMs: ms(Math.min(firstEnded, performance.now())),
    ms: ms(performance.now()),
    statuses,
  };
}
