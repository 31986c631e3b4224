// Prometheus metrics (prom-client), named by the spec's operations, on a listener of their
// own (METRICS_PORT, METRICS_HOST): never the API's port, so a balancer in front of the API
// does not publish them. docs/operations.md ("Metrics") says what each one means. Off
// (METRICS_PORT unset or 0), nothing here is in the request path: createApp adds the
// middleware and the hooks only when given a Metrics.
import type { Request, RequestHandler, Response } from 'express';
import { createServer, type Server } from 'node:http';
import { performance } from 'node:perf_hooks';
import { AggregatorRegistry, collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Logger } from 'pino';
import type { Storage } from '../../domain/storage';
import type { StoreEvents } from '../../domain/store';
import { fairShareReasons } from '../http/admission';
import { closeReasons, refusalReasons, type ConnectionCounts } from '../http/connections';
import type { ApiError } from '../../domain/errors';
import type { OnRefusal, RateLimiterName } from '../security/rate-limit';
import type { OperationEntry } from '../spec';
import { StartupError } from '../startup';

export interface Metrics {
  readonly registry: Registry;
  /** First in the app's chain: times every request and names it by its operation. */
  requests(operations: Record<string, OperationEntry>): RequestHandler;
  /** The storage with its transactions timed, and its pool (PostgreSQL) read at each scrape. */
  storage(storage: Storage): Storage;
  /** For createStore: orders placed and messages queued, once committed. */
  readonly events: StoreEvents;
  /** For createRateLimiters: refusals by limiter. */
  readonly rateLimited: OnRefusal;
  /** For the error mapper: the store's refusals by code. */
  readonly answered: (error: ApiError) => void;
  /** For the delivery worker: each message's lag, queued to sent. */
  readonly delivered: (lagSeconds: number) => void;
  /** The API server's open, refused and closed connections (server/http/connections.ts), read at each scrape. */
  connections(counts: ConnectionCounts): void;
}

/**
 * The service's own pages that the spec does not declare (server/app.ts serves them before
 * the validator), under names of their own; start-up fails if an operationId takes one.
 */
const pages: ReadonlyArray<{ operation: string; route: string; prefix?: boolean }> = [
  { operation: 'openapiJson', route: '/openapi.json' },
  { operation: 'openapiYaml', route: '/openapi.yaml' },
  { operation: 'docs', route: '/docs' },
  { operation: 'docsAsset', route: '/docs/assets/{file}', prefix: true },
];
const docsAssets = '/docs/assets/';

const limiters: readonly RateLimiterName[] = ['address', 'account', 'login-account', 'login-address', 'password-checks', 'signup'];

// Requests of this service take about a millisecond; the top buckets catch a stalled database.
const durationBuckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
// Messages wait MESSAGE_DELIVERY_DELAY_MS (0.5 s by default) by design; the rest is lag.
const lagBuckets = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];

type Observe = { observe(value: number): void };

/** One label set's observations: a count per bucket (not cumulative; the last is above the top bound), their sum and count. */
class Tally implements Observe {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(
    readonly labels: Readonly<Record<string, string>>,
    private readonly bounds: readonly number[],
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    // From the bottom: nearly every request falls in the first bucket or two.
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > (bounds[i] as number)) i++;
    this.counts[i] = (this.counts[i] as number) + 1;
    this.sum += value;
    this.count++;
  }
}

/**
 * A histogram kept on the request path as plain numbers per label set, made prom-client's
 * form only when scraped. prom-client's own observe allocates and builds a string key from
 * the labels on every call: on the request path, most of what the metrics cost, much of it
 * in the garbage collector (docs/performance.md, "Metrics and tracing"). The exposition
 * and the cluster's sum stay prom-client's (the registry and AggregatorRegistry read get()).
 */
class TallyHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly tallies: Tally[] = [];
  constructor(
    readonly name: string,
    readonly help: string,
    private readonly bounds: readonly number[],
    registry: Registry,
  ) {
    registry.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  /** The tally of one label set; callers keep it, a second call makes another series. */
  tally(labels: Record<string, string>): Tally {
    const tally = new Tally(labels, this.bounds);
    this.tallies.push(tally);
    return tally;
  }

  get() {
    const bucket = `${this.name}_bucket`;
    const values: Array<{ labels: Record<string, string | number>; value: number; metricName: string }> = [];
    // A label set appears once observed, as prom-client's own would.
    for (const t of this.tallies) {
      if (t.count === 0) continue;
      let below = 0;
      this.bounds.forEach((le, i) => {
        below += t.counts[i] as number;
        values.push({ labels: { ...t.labels, le }, value: below, metricName: bucket });
      });
      values.push({ labels: { ...t.labels, le: '+Inf' }, value: t.count, metricName: bucket });
      values.push({ labels: { ...t.labels }, value: t.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { ...t.labels }, value: t.count, metricName: `${this.name}_count` });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator });
  }

  reset(): void {
    for (const t of this.tallies) {
      t.counts.fill(0);
      t.sum = 0;
      t.count = 0;
    }
  }
}

/** One name a request is counted under: its labels but the status, and a histogram child per status. */
interface Named {
  operation: string;
  method: string;
  route: string;
  byStatus: Map<number, Observe>;
  /** The deprecated operation's counter, when it is one. */
  deprecated?: { inc(): void };
}

const started = Symbol('metrics.started');
type Timed = Response & { [started]: number };

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });

  let inFlight = 0;
  new Gauge({
    name: 'http_server_active_requests',
    help: 'Requests on the API port being answered now',
    registers: [registry],
    collect() {
      this.set(inFlight);
    },
  });
  const duration = new TallyHistogram(
    'http_server_request_duration_seconds',
    'Time from a request reaching the app to its answer being written, by operation (operationId), method, route template and status',
    durationBuckets,
    registry,
  );
  const deprecatedCalls = new Counter({
    name: 'petstore_deprecated_calls_total',
    help: 'Requests to operations the spec marks deprecated, whatever their answer',
    labelNames: ['operation'] as const,
    registers: [registry],
  });
  const rateLimitRefusals = new Counter({
    name: 'petstore_rate_limit_refusals_total',
    help: 'Requests refused with 429 rate_limited, by limiter',
    labelNames: ['limiter'] as const,
    registers: [registry],
  });
  for (const limiter of limiters) rateLimitRefusals.labels({ limiter }).inc(0);
  const storeRefusals = new Counter({
    name: 'petstore_store_refusals_total',
    help: "Requests the store refused, by the Error's code (a store rule, or the database unavailable)",
    labelNames: ['code'] as const,
    registers: [registry],
  });
  const ordersPlaced = new Counter({
    name: 'petstore_orders_placed_total',
    help: 'Orders placed (replays not counted)',
    registers: [registry],
  });
  const messagesQueued = new Counter({
    name: 'petstore_messages_queued_total',
    help: 'Messages queued for delivery',
    registers: [registry],
  });
  const deliveryLag = new Histogram({
    name: 'petstore_message_delivery_lag_seconds',
    help: 'Time from a message being queued to its delivery (the configured delay included); the count is the messages delivered',
    buckets: lagBuckets,
    registers: [registry],
  });
  const transactions = new TallyHistogram(
    'petstore_storage_transaction_duration_seconds',
    "Time of the store's write transactions, waiting for the lock or a connection included, by outcome",
    durationBuckets,
    registry,
  );
  const committed = transactions.tally({ outcome: 'committed' });
  const rolledBack = transactions.tally({ outcome: 'rolled_back' });

  const requests = (operations: Record<string, OperationEntry>): RequestHandler => {
    for (const { operation } of pages) {
      if (operations[operation]) throw new Error(`operationId ${operation} is the metrics' name for a page of the service; rename it`);
    }
    const named = (operation: string, method: string, route: string, deprecated: boolean): Named => ({
      operation,
      method,
      route,
      byStatus: new Map(),
      ...(deprecated && { deprecated: deprecatedCalls.labels({ operation }) }),
    });
    const byId = new Map<string, Named>();
    for (const [id, op] of Object.entries(operations)) {
      const name = named(id, op.method.toUpperCase(), op.path, op.deprecated !== undefined);
      byId.set(id, name);
      if (op.deprecated) deprecatedCalls.labels({ operation: id }).inc(0);
    }
    // Requests no operation matched: a few names per method, all bounded (Node's parser
    // takes only the methods HTTP defines; routes are templates or empty).
    const others = new Map<string, Named>();
    const other = (operation: string, method: string, route: string) => {
      const key = `${method} ${operation} ${route}`;
      let found = others.get(key);
      if (!found) others.set(key, (found = named(operation, method, route, false)));
      return found;
    };

    /** The name of a request no operation of the spec matched: a page, or unmatched. */
    const unmatched = (req: Request): Named => {
      const path = req.path;
      const method = req.method;
      if (req.specPath) return other('unmatched', method, req.specPath.path);
      const page = pages.find((p) => (p.prefix ? path.startsWith(docsAssets) && !path.includes('/', docsAssets.length) : path === p.route));
      return other(page ? page.operation : 'unmatched', method, page ? page.route : '');
    };

    function finished(this: Timed): void {
      inFlight--;
      // The client went before its answer was written: no status to count it under.
      if (!this.writableFinished) return;
      const req = this.req as Request;
      const id = req.operation?.id;
      const name = (id !== undefined && byId.get(id)) || unmatched(req);
      const status = this.statusCode;
      let child = name.byStatus.get(status);
      if (!child) {
        child = duration.tally({ operation: name.operation, method: name.method, route: name.route, status: String(status) });
        name.byStatus.set(status, child);
      }
      child.observe((performance.now() - this[started]) / 1000);
      name.deprecated?.inc();
    }

    return (_req, res, next) => {
      inFlight++;
      (res as Timed)[started] = performance.now();
      res.on('close', finished);
      next();
    };
  };

  let poolRead = false;
  const storage = (given: Storage): Storage => {
    const pool = given.pool;
    if (pool && !poolRead) {
      poolRead = true;
      const gauge = (name: string, help: string, read: () => number) =>
        new Gauge({
          name,
          help,
          registers: [registry],
          collect() {
            this.set(read());
          },
        });
      gauge('petstore_pg_pool_connections', 'PostgreSQL connections this process holds, busy or idle', () => pool.totalCount);
      gauge('petstore_pg_pool_idle_connections', 'PostgreSQL connections held and idle', () => pool.idleCount);
      gauge('petstore_pg_pool_waiting_requests', 'Work waiting for a PostgreSQL connection from the pool', () => pool.waitingCount);
    }
    return {
      ...given,
      transaction(work) {
        const at = performance.now();
        return given.transaction(work).then(
          (value) => {
            committed.observe((performance.now() - at) / 1000);
            return value;
          },
          (error: unknown) => {
            rolledBack.observe((performance.now() - at) / 1000);
            throw error;
          },
        );
      },
    };
  };

  const connections = (counts: ConnectionCounts) => {
    new Gauge({
      name: 'petstore_open_connections',
      help: "Connections open on the API's port",
      registers: [registry],
      collect() {
        this.set(counts.open);
      },
    });
    // The caps and the server count on their own (no metrics in their path); each scrape adds what is new.
    const counter = <Reason extends string>(
      name: string,
      help: string,
      reasons: readonly Reason[],
      read: () => Readonly<Record<Reason, number>>,
    ) => {
      const reported = new Map<Reason, number>();
      new Counter({
        name,
        help,
        labelNames: ['reason'] as const,
        registers: [registry],
        collect() {
          const now = read();
          for (const reason of reasons) {
            this.labels({ reason }).inc(now[reason] - (reported.get(reason) ?? 0));
            reported.set(reason, now[reason]);
          }
        },
      });
    };
    counter(
      'petstore_refused_connections_total',
      'Connections refused as they were accepted, by the cap that refused them',
      refusalReasons,
      () => counts.refused,
    );
    counter(
      'petstore_closed_connections_total',
      'Connections closed while being served, by why: answers not read for SEND_TIMEOUT_MS, or more requests sent ahead of their answers than one connection may have',
      closeReasons,
      () => counts.closed,
    );
    counter(
      'petstore_fair_share_requests_total',
      "Requests held back for their client's fair share: made to wait for its turn (deferred), or refused with 429 past FAIR_SHARE_QUEUE (queue_full); and reads of a connection put off while its client's requests wait (read_deferred)",
      fairShareReasons,
      () => counts.fairShare,
    );
  };

  return {
    registry,
    requests,
    connections,
    storage,
    events: { orderPlaced: () => ordersPlaced.inc(), messageQueued: () => messagesQueued.inc() },
    rateLimited: (limiter) => rateLimitRefusals.labels({ limiter }).inc(),
    answered: (error) => {
      if (error.byStore) storeRefusals.labels({ code: error.code }).inc();
    },
    delivered: (lagSeconds) => deliveryLag.observe(lagSeconds),
  };
}

/** What GET /metrics answers. */
export type Exposition = () => Promise<{ contentType: string; body: string }>;

export const expositionOf =
  (registry: Registry): Exposition =>
  async () => ({ contentType: registry.contentType, body: await registry.metrics() });

/**
 * With WEB_CONCURRENCY: the primary's exposition, every worker's metrics added up
 * (prom-client's AggregatorRegistry asks each worker over the cluster's IPC channel).
 */
export function clusterExposition(): Exposition {
  const aggregator = new AggregatorRegistry();
  return async () => ({ contentType: aggregator.contentType, body: await aggregator.clusterMetrics() });
}

/** In a cluster worker: answer the primary's requests with this registry. */
export function reportToPrimary(registry: Registry): void {
  AggregatorRegistry.setRegistries([registry]);
  // Its constructor is what adds the worker's listener for the primary's requests.
  new AggregatorRegistry();
}

/** The metrics listener: GET (or HEAD) /metrics, nothing else. Resolves once listening; rejects if it cannot. */
export function serveMetrics(where: { port: number; host: string }, exposition: Exposition, log: Logger): Promise<Server> {
  const server = createServer((req, res) => {
    const path = req.url?.split('?')[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('Only GET /metrics is served here\n');
      return;
    }
    exposition().then(
      ({ contentType, body }) => void res.writeHead(200, { 'Content-Type': contentType }).end(body),
      (err: unknown) => {
        log.error({ err }, 'metrics could not be collected');
        res.writeHead(503, { 'Content-Type': 'text/plain; charset=utf-8' }).end('The metrics could not be collected\n');
      },
    );
  });
  // Prometheus keeps its connection open between scrapes; a stopping service must not wait for it.
  server.keepAliveTimeout = 5_000;
  return new Promise((resolve, reject) => {
    server.once('error', (err) =>
      reject(new StartupError(`Cannot serve the metrics on ${where.host}:${where.port} (METRICS_HOST, METRICS_PORT): ${err.message}`)),
    );
    server.listen(where.port, where.host, () => {
      server.removeAllListeners('error');
      server.on('error', (err) => log.error({ err }, 'metrics listener failed'));
      log.info(`Metrics at http://${where.host}:${where.port}/metrics`);
      resolve(server);
    });
  });
}
