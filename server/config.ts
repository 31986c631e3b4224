// The one place that reads the environment. Parsed once with zod; a bad value stops
// start-up with a message naming the variable.
import { z } from 'zod';

const boolean = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

const schema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default('127.0.0.1'),
  DATABASE_PATH: z.string().min(1).default('./data/petstore.db'),
  // When set, PostgreSQL instead of the SQLite file (README "Deployment").
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
    .optional(),
  WEB_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(1),
  RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).max(1_000_000).default(600),
  VALIDATE_RESPONSES: boolean.default(true),
  SEED_DEMO_DATA: boolean.default(true),
  MESSAGE_DELIVERY_DELAY_MS: z.coerce.number().int().min(0).max(60_000).default(500),
  SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().min(0).max(600_000).default(10_000),
  TRUST_PROXY: boolean.default(false),
  LOG_LEVEL: z.enum(['debug', 'info', 'error', 'silent']).default('info'),
});

export interface Config {
  port: number;
  host: string;
  databasePath: string;
  /** PostgreSQL instead of databasePath when set. */
  databaseUrl: string | undefined;
  /** Worker processes sharing the port (server/cluster.ts). */
  webConcurrency: number;
  rateLimitPerMinute: number;
  validateResponses: boolean;
  seedDemoData: boolean;
  messageDeliveryDelayMs: number;
  shutdownTimeoutMs: number;
  trustProxy: boolean;
  logLevel: 'debug' | 'info' | 'error' | 'silent';
  /** Request bodies larger than this are refused with 413 (PRODUCT.md section 7). */
  bodyLimitBytes: number;
}

export class ConfigError extends Error {}

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const result = schema.safeParse(env);
  if (!result.success) {
    const problems = result.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`).join('\n');
    throw new ConfigError(`Invalid configuration:\n${problems}`);
  }
  const e = result.data;
  return {
    port: e.PORT,
    host: e.HOST,
    databasePath: e.DATABASE_PATH,
    databaseUrl: e.DATABASE_URL,
    webConcurrency: e.WEB_CONCURRENCY,
    rateLimitPerMinute: e.RATE_LIMIT_PER_MINUTE,
    validateResponses: e.VALIDATE_RESPONSES,
    seedDemoData: e.SEED_DEMO_DATA,
    messageDeliveryDelayMs: e.MESSAGE_DELIVERY_DELAY_MS,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    trustProxy: e.TRUST_PROXY,
    logLevel: e.LOG_LEVEL,
    bodyLimitBytes: 64 * 1024,
  };
}
