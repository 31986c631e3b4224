// The one place that reads the environment. Parsed once with zod; a bad value stops
// start-up with a message naming the variable. `Config` is inferred from the schema, so
// a setting is written once. zod's mini API: the schema is built once, at every start,
// and the classic API's chained methods cost that start more (docs/performance.md,
// "Start"). Every check says its own message: the mini API loads none of zod's locales.
import { isIP } from 'node:net';
import { availableParallelism } from 'node:os';
import * as z from 'zod/mini';
import { defaultDatabaseTimeoutMs } from '../domain/storage';
import { defaultBounds } from '../domain/store';

// Each check's own message says what is allowed; loadConfig puts the variable and the value given before it.
const boolean = z.pipe(
  z.enum(['true', 'false', '1', '0'], { error: 'expected true, false, 1 or 0' }),
  z.transform((v) => v === 'true' || v === '1'),
);
const int = (min: number, max: number) => {
  const error = `expected an integer from ${min} to ${max}`;
  return z.pipe(z.coerce.number({ error }), z.int({ error }).check(z.gte(min, { error }), z.lte(max, { error })));
};
/** A string that must not be empty, `error` saying what it is for. */
const nonEmpty = (error: string) => z.string().check(z.minLength(1, { error }));

/** Where the SQLite file is when DATABASE_PATH is not set, relative to the working folder. */
export const defaultDatabasePath = './data/petstore.db';

/** Request bodies larger than this are refused with 413 (openapi.yaml, "Limits"). */
export const bodyLimitBytes = 64 * 1024;

/**
 * Password hashes at once in a process, by default: one per core but one, so that the event
 * loop keeps a core while logins arrive in a burst, shared among the WEB_CONCURRENCY
 * processes; at least one (server/security/passwords.ts runs them).
 */
function defaultHashConcurrency(webConcurrency: number, cores = availableParallelism()): number {
  return Math.max(1, Math.floor((cores - 1) / webConcurrency));
}

const namedProxyRanges = new Set(['loopback', 'linklocal', 'uniquelocal']);

function isProxyAddress(entry: string): boolean {
  if (namedProxyRanges.has(entry)) return true;
  const [address = '', prefix, ...rest] = entry.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  return prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128));
}

/**
 * Express's `trust proxy` forms that name the proxies: `false` (none), a hop count, or
 * proxy addresses/subnets. `true` (trust every hop) is refused: the left-most
 * X-Forwarded-For entry is whatever the client wrote, so it would let anyone choose
 * the address they are rate-limited as.
 */
const trustProxy = z.pipe(
  z.string().check(z.trim()),
  z.transform((value: string, ctx): false | number | string[] => {
    if (value === 'false' || value === '0' || value === '') return false;
    if (/^\d{1,2}$/.test(value)) return Number(value);
    const entries = value.split(',').map((e) => e.trim());
    if (value !== 'true' && entries.every(isProxyAddress)) return entries;
    ctx.issues.push({
      code: 'custom',
      input: value,
      message:
        'expected false, a hop count (1 = one proxy in front) or a comma-separated list of proxy addresses or subnets ' +
        '(loopback, linklocal, uniquelocal, 10.0.0.0/8, ...); `true` would trust the client-written X-Forwarded-For',
    });
    return z.NEVER;
  }),
);

/**
 * Exact origins (`https://app.example.com`, `http://localhost:5173`), comma-separated: a
 * browser sends an origin as scheme, host and a port only when it is not the default, in
 * lower case, so an entry written any other way would never match and is refused.
 */
const corsOrigins = z.pipe(
  z.string(),
  z.transform((value: string, ctx): string[] => {
    const entries = value
      .split(',')
      .map((e) => e.trim())
      .filter(Boolean);
    for (const entry of entries) {
      let origin: string | undefined;
      try {
        const url = new URL(entry);
        origin = url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : undefined;
      } catch {
        origin = undefined;
      }
      if (origin !== entry) {
        ctx.issues.push({
          code: 'custom',
          input: value,
          message: `${JSON.stringify(entry)} is not an origin as a browser sends it (scheme://host[:port], lower case, no path)${origin ? `; did you mean ${origin}?` : ''}`,
        });
        return z.NEVER;
      }
    }
    return entries;
  }),
);

/** Empty is unset, as the OpenTelemetry specification says of its variables. */
const unsetIfBlank = z.pipe(
  z.string(),
  z.transform((v: string) => v.trim() || undefined),
);
const otlpEndpoint = z.pipe(unsetIfBlank, z.optional(z.url({ protocol: /^(http|https)$/, error: 'expected an http:// or https:// URL' })));
/** A comma-separated list of `names`; empty is unset. */
const commaList = <const T extends readonly [string, ...string[]]>(names: T) =>
  z.pipe(
    z.pipe(
      z.string(),
      z.transform((v: string) =>
        v
          .split(',')
          .map((e) => e.trim())
          .filter(Boolean),
      ),
    ),
    z.array(z.enum(names, { error: `expected ${names.slice(0, -1).join(', ')} or ${names.at(-1)} (comma-separated)` })),
  );
const tracesExporter = commaList(['otlp', 'console', 'zipkin', 'none']);
// The propagators OpenTelemetry's Node SDK offers, which name where a caller's span is read
// from; empty is unset.
const propagators = ['tracecontext', 'baggage', 'b3', 'b3multi', 'jaeger', 'none'] as const;
export type TracePropagator = (typeof propagators)[number];
const defaultPropagators: TracePropagator[] = ['tracecontext', 'baggage'];
const tracePropagators = commaList(propagators);
// The OpenTelemetry specification's samplers (the remote ones, jaeger_remote and xray, are
// not offered); empty is unset.
const samplers = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
const tracesSampler = z.pipe(unsetIfBlank, z.optional(z.enum(samplers, { error: `expected ${samplers.join(', ')}` })));
const ratioError = 'expected a ratio from 0 to 1';
const samplerRatio = z.pipe(
  z.pipe(
    z.string(),
    z.transform((v: string) => (v.trim() ? Number(v) : undefined)),
  ),
  z.optional(z.number({ error: ratioError }).check(z.gte(0, ratioError), z.lte(1, ratioError))),
);

const variables = z.object({
  PORT: z._default(int(0, 65535), 3000),
  HOST: z._default(nonEmpty('expected an address to listen on (127.0.0.1, 0.0.0.0, ::)'), '127.0.0.1'),
  DATABASE_PATH: z._default(nonEmpty('expected the path of a SQLite file'), defaultDatabasePath),
  // A cap on the SQLite file, so that it cannot take the whole disk (docs/configuration.md).
  DATABASE_MAX_SIZE_MB: z.optional(int(1, 1_000_000_000)),
  // When set, PostgreSQL instead of the SQLite file (docs/deployment.md).
  DATABASE_URL: z.optional(z.string().check(z.regex(/^postgres(ql)?:\/\//, 'expected a postgres:// or postgresql:// URL'))),
  // How long start-up waits for PostgreSQL to answer before giving up (README "Deployment").
  DATABASE_STARTUP_TIMEOUT_S: z._default(int(0, 3_600), 60),
  // Connections each process keeps to PostgreSQL (docs/deployment.md).
  DATABASE_POOL_SIZE: z._default(int(1, 1_000), 10),
  // The bound on every wait on the database: connection, statement, lock (docs/configuration.md).
  DATABASE_TIMEOUT_MS: z._default(int(100, 600_000), defaultDatabaseTimeoutMs),
  WEB_CONCURRENCY: z._default(int(1, 64), 1),
  RATE_LIMIT_PER_MINUTE: z._default(int(1, 1_000_000), 600),
  RATE_LIMIT_PER_ADDRESS_PER_MINUTE: z.optional(int(1, 10_000_000)),
  LOGIN_FAILURES_PER_ACCOUNT: z._default(int(1, 1_000_000), 10),
  LOGIN_FAILURES_PER_ADDRESS: z._default(int(1, 1_000_000), 30),
  LOGIN_LOCKOUT_MINUTES: z._default(int(1, 1_440), 15),
  // Password checks (HTTP Basic, successful or not) a minute per account: docs/configuration.md.
  PASSWORD_CHECKS_PER_MINUTE: z._default(int(1, 1_000_000), 30),
  SIGNUPS_PER_ADDRESS_PER_HOUR: z._default(int(1, 1_000_000), 10),
  // Password hashes at once per process, and how many may wait (docs/operations.md, "Password hashing").
  PASSWORD_HASH_CONCURRENCY: z.optional(int(1, 64)),
  PASSWORD_HASH_QUEUE: z._default(int(0, 100_000), 16),
  API_KEYS_PER_ACCOUNT: z._default(int(1, 1_000_000), defaultBounds.activeApiKeysPerAccount),
  QUEUED_MESSAGES_PER_ACCOUNT: z._default(int(1, 1_000_000), defaultBounds.queuedMessagesPerAccount),
  CORS_ORIGINS: z._default(corsOrigins, []),
  VALIDATE_RESPONSES: z._default(boolean, true),
  // Operations whose handler is still the generated stub answer from openapi.yaml instead
  // of 501 (docs/contract.md, "Mock answers"): for development, refused in production.
  MOCK_UNIMPLEMENTED: z._default(boolean, false),
  // Read for one thing only: `production` refuses MOCK_UNIMPLEMENTED.
  NODE_ENV: z.optional(z.string()),
  SEED_DEMO_DATA: z._default(boolean, true),
  MESSAGE_DELIVERY_DELAY_MS: z._default(int(0, 60_000), 500),
  // How long SIGTERM keeps serving after /readyz turns 503: a balancer's checks must see it
  // first (docs/operations.md, "Stopping").
  SHUTDOWN_DELAY_MS: z._default(int(0, 600_000), 5_000),
  SHUTDOWN_TIMEOUT_MS: z._default(int(0, 600_000), 10_000),
  // After listening, /readyz waits this long at most while the GETs warm up (server/pipeline/warm-up.ts).
  WARM_UP_MS: z._default(int(0, 10_000), 300),
  // Unset: derived from the file-descriptor limit (server/http/connections.ts, docs/operations.md).
  MAX_CONNECTIONS: z.optional(int(1, 10_000_000)),
  // 0 = no per-address cap (docs/operations.md, "Connections").
  MAX_CONNECTIONS_PER_ADDRESS: z._default(int(0, 10_000_000), 512),
  HEADERS_TIMEOUT_MS: z._default(int(100, 600_000), 10_000),
  REQUEST_TIMEOUT_MS: z._default(int(100, 600_000), 30_000),
  KEEP_ALIVE_TIMEOUT_MS: z._default(int(100, 600_000), 5_000),
  // A connection whose answers the client leaves unread this long is closed (docs/operations.md, "Connections").
  SEND_TIMEOUT_MS: z._default(int(100, 600_000), 10_000),
  // Each client's share of the event loop (docs/operations.md, "Fair share").
  FAIR_SHARE: z._default(boolean, true),
  FAIR_SHARE_QUEUE: z._default(int(1, 1_000_000), 1_024),
  FAIR_SHARE_SLICE_MS: z._default(int(1, 1_000), 1),
  // Past this event-loop delay new requests are shed with 503 overloaded; 0 = never (docs/operations.md).
  OVERLOAD_EVENT_LOOP_DELAY_MS: z._default(int(0, 60_000), 0),
  TRUST_PROXY: z._default(trustProxy, false),
  LOG_LEVEL: z._default(
    z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'], {
      error: 'expected trace, debug, info, warn, error, fatal or silent',
    }),
    'info',
  ),
  // Prometheus metrics on a listener of their own (docs/operations.md, "Metrics"); 0 is off.
  METRICS_PORT: z._default(int(0, 65535), 0),
  METRICS_HOST: z._default(nonEmpty('expected an address to listen on (127.0.0.1, 0.0.0.0, ::)'), '127.0.0.1'),
  // Whether to trace (docs/operations.md, "Tracing"); the OpenTelemetry SDK reads the rest
  // of the OTEL_* variables itself (exporter protocol, headers, service name, sampler).
  OTEL_SDK_DISABLED: z.optional(boolean),
  OTEL_TRACES_EXPORTER: z.optional(tracesExporter),
  OTEL_EXPORTER_OTLP_ENDPOINT: z.optional(otlpEndpoint),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.optional(otlpEndpoint),
  // Read here rather than by the SDK: the service decides before any OpenTelemetry call
  // whether a new trace is kept (server/observability/tracing.ts).
  OTEL_TRACES_SAMPLER: z.optional(tracesSampler),
  OTEL_TRACES_SAMPLER_ARG: z.optional(samplerRatio),
  // Read here too: the event loop reads a caller's span, the SDK on its thread does not.
  OTEL_PROPAGATORS: z.optional(tracePropagators),
});

/** Every environment variable the service reads (docs/configuration.md lists them). */
export const configVariables = Object.keys(variables.shape);

const schema = z.pipe(
  variables.check(
    z.refine((e) => e.HEADERS_TIMEOUT_MS <= e.REQUEST_TIMEOUT_MS, {
      path: ['HEADERS_TIMEOUT_MS'],
      error: 'must not be longer than REQUEST_TIMEOUT_MS',
    }),
    // A balancer in front of the API must not publish the metrics.
    z.refine((e) => e.METRICS_PORT === 0 || e.METRICS_PORT !== e.PORT, {
      path: ['METRICS_PORT'],
      error: 'must not be the API port (PORT): the metrics have a listener of their own',
    }),
    // Made-up answers must never reach a production client.
    z.refine((e) => !(e.MOCK_UNIMPLEMENTED && e.NODE_ENV === 'production'), {
      path: ['MOCK_UNIMPLEMENTED'],
      error: 'must not be on when NODE_ENV=production: mock answers are made up from openapi.yaml, for development only',
    }),
  ),
  z.transform((e) => ({
    port: e.PORT,
    host: e.HOST,
    databasePath: e.DATABASE_PATH,
    /** Past this size the SQLite file takes no more writes (503 storage_unavailable). */
    databaseMaxSizeMb: e.DATABASE_MAX_SIZE_MB,
    /** PostgreSQL instead of databasePath when set. */
    databaseUrl: e.DATABASE_URL,
    /** Start-up retries an unreachable PostgreSQL for this long, then exits 1. */
    databaseStartupTimeoutMs: e.DATABASE_STARTUP_TIMEOUT_S * 1000,
    /** Connections in this process's PostgreSQL pool. */
    databasePoolSize: e.DATABASE_POOL_SIZE,
    /** Any one wait on the database (a connection, a statement, a lock, SQLite's busy wait) ends within this, as a 503. */
    databaseTimeoutMs: e.DATABASE_TIMEOUT_MS,
    /** Worker processes sharing the port (server/cluster.ts). */
    webConcurrency: e.WEB_CONCURRENCY,
    /** Requests a minute per account, counted after authentication. */
    rateLimitPerMinute: e.RATE_LIMIT_PER_MINUTE,
    /** Requests a minute per client address, counted before authentication. */
    rateLimitPerAddressPerMinute: e.RATE_LIMIT_PER_ADDRESS_PER_MINUTE ?? e.RATE_LIMIT_PER_MINUTE,
    loginFailuresPerAccount: e.LOGIN_FAILURES_PER_ACCOUNT,
    loginFailuresPerAddress: e.LOGIN_FAILURES_PER_ADDRESS,
    loginLockoutMs: e.LOGIN_LOCKOUT_MINUTES * 60_000,
    /** HTTP Basic password checks a minute per account, the right password too. */
    passwordChecksPerMinute: e.PASSWORD_CHECKS_PER_MINUTE,
    /** Accounts one client address may create an hour (POST /accounts that answer 201). */
    signupsPerAddressPerHour: e.SIGNUPS_PER_ADDRESS_PER_HOUR,
    /** How many password hashes run at once in this process and how many wait (server/security/passwords.ts). */
    passwordHashing: {
      concurrency: e.PASSWORD_HASH_CONCURRENCY ?? defaultHashConcurrency(e.WEB_CONCURRENCY),
      queue: e.PASSWORD_HASH_QUEUE,
    },
    /** What one account may hold at once (domain/store.ts). */
    bounds: { activeApiKeysPerAccount: e.API_KEYS_PER_ACCOUNT, queuedMessagesPerAccount: e.QUEUED_MESSAGES_PER_ACCOUNT },
    /** Origins whose browser pages may call the API (server/pipeline/browser-headers.ts); none by default. */
    corsOrigins: e.CORS_ORIGINS,
    validateResponses: e.VALIDATE_RESPONSES,
    /** Stubs answer from the spec's examples and schemas (server/pipeline/mock.ts) instead of 501. */
    mockUnimplemented: e.MOCK_UNIMPLEMENTED,
    seedDemoData: e.SEED_DEMO_DATA,
    messageDeliveryDelayMs: e.MESSAGE_DELIVERY_DELAY_MS,
    /** After SIGTERM: answering (with `Connection: close`, /readyz 503) this long before draining. */
    shutdownDelayMs: e.SHUTDOWN_DELAY_MS,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    /** After listening: the GETs run in process for at most this long before /readyz says ready; 0 = not at all. */
    warmUpMs: e.WARM_UP_MS,
    /** Open connections at most; unset, what the file-descriptor limit leaves room for. */
    maxConnections: e.MAX_CONNECTIONS,
    /** Open connections one client address may hold (trusted proxies aside); 0 = no cap. */
    maxConnectionsPerAddress: e.MAX_CONNECTIONS_PER_ADDRESS,
    headersTimeoutMs: e.HEADERS_TIMEOUT_MS,
    requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
    keepAliveTimeoutMs: e.KEEP_ALIVE_TIMEOUT_MS,
    /** How long an answer may wait unread, not one byte of it taken by the client, before its connection is closed. */
    sendTimeoutMs: e.SEND_TIMEOUT_MS,
    /** Whether requests wait for their client's turn while others' wait (server/http/admission.ts). */
    fairShare: e.FAIR_SHARE,
    /** Requests one client may have waiting for its turn; past it, 429. */
    fairShareQueue: e.FAIR_SHARE_QUEUE,
    /** Time a turn of the event loop spends running requests before it yields to I/O. */
    fairShareSliceMs: e.FAIR_SHARE_SLICE_MS,
    /** Event-loop delay (ms) past which requests are shed (server/http/overload.ts); 0 = off. */
    overloadEventLoopDelayMs: e.OVERLOAD_EVENT_LOOP_DELAY_MS,
    trustProxy: e.TRUST_PROXY,
    logLevel: e.LOG_LEVEL,
    /** Where GET /metrics is served (server/observability/metrics.ts); off when the port is 0. */
    metrics: e.METRICS_PORT === 0 ? undefined : { port: e.METRICS_PORT, host: e.METRICS_HOST },
    bodyLimitBytes,
    /**
     * OpenTelemetry traces (server/observability/tracing.ts): on when an exporter is named, or, unnamed
     * (the SDK's default is OTLP), when an OTLP endpoint is given; never when disabled.
     */
    tracing:
      !e.OTEL_SDK_DISABLED &&
      (e.OTEL_TRACES_EXPORTER?.length
        ? !e.OTEL_TRACES_EXPORTER.includes('none')
        : Boolean(e.OTEL_EXPORTER_OTLP_ENDPOINT ?? e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)),
    /**
     * Which traces are kept, as OTEL_TRACES_SAMPLER names it (default parentbased_always_on):
     * the share of new traces (OTEL_TRACES_SAMPLER_ARG, default 1, for the ratio samplers),
     * and whether a caller's sampled flag decides for a request that carries one.
     */
    traceSampler: traceSampler(e.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on', e.OTEL_TRACES_SAMPLER_ARG ?? 1),
    /** Where a caller's span is read from, as OTEL_PROPAGATORS names it (default tracecontext,baggage). */
    tracePropagators: e.OTEL_PROPAGATORS?.length ? e.OTEL_PROPAGATORS : defaultPropagators,
  })),
);

export interface TraceSampler {
  /** The share of new traces kept, from 0 to 1. */
  ratio: number;
  /** A caller's sampled flag decides; otherwise the ratio decides by the trace id for those too. */
  parentBased: boolean;
}

function traceSampler(name: (typeof samplers)[number], ratio: number): TraceSampler {
  const parentBased = name.startsWith('parentbased_');
  const root = parentBased ? name.slice('parentbased_'.length) : name;
  return { parentBased, ratio: root === 'always_on' ? 1 : root === 'always_off' ? 0 : ratio };
}

export type Config = z.output<typeof schema>;

export class ConfigError extends Error {}

/**
 * How a value is shown in an error: as given, but a URL's password replaced (DATABASE_URL
 * carries one), and a long value cut, so that the line stays one line.
 */
function shown(value: string): string {
  const safe = value.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]*:)[^@]*@/i, '$1***@');
  const cut = safe.length > 80 ? `${safe.slice(0, 77)}...` : safe;
  return /[\s"]/.test(cut) || cut === '' ? JSON.stringify(cut) : cut;
}

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  // Parsed once: zod's compiled fast path (new Function at the first parse) costs more than it saves.
  const result = schema.safeParse(env, { jitless: true });
  if (!result.success) {
    // One setting wrong is one line, as every setting that stops start-up says it:
    // the variable, the value given, what is allowed (`PORT=abc: expected an integer from 0 to 65535`).
    const problems = result.error.issues.map((i) => {
      const name = String(i.path[0] ?? '');
      const given = env[name];
      return `${given === undefined ? name : `${name}=${shown(given)}`}: ${i.message}`;
    });
    throw new ConfigError(
      problems.length === 1
        ? `Invalid configuration: ${problems[0]}`
        : `Invalid configuration:\n${problems.map((p) => `  ${p}`).join('\n')}`,
    );
  }
  return result.data;
}
