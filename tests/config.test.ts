import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { configVariables, loadConfig } from '../server/config';

describe('configuration', () => {
  it('has working defaults', () => {
    expect(loadConfig({})).toMatchObject({
      port: 3000,
      databasePath: './data/petstore.db',
      rateLimitPerMinute: 600,
      rateLimitPerAddressPerMinute: 600,
      databasePoolSize: 10,
      // Unset: derived from the file-descriptor limit when the server starts (server/http/connections.ts).
      maxConnections: undefined,
      maxConnectionsPerAddress: 512,
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
      keepAliveTimeoutMs: 5_000,
      trustProxy: false,
      bodyLimitBytes: 64 * 1024,
    });
  });

  it('sizes the PostgreSQL pool from DATABASE_POOL_SIZE, at least one connection', () => {
    expect(loadConfig({ DATABASE_POOL_SIZE: '4' }).databasePoolSize).toBe(4);
    expect(() => loadConfig({ DATABASE_POOL_SIZE: '0' })).toThrow(/DATABASE_POOL_SIZE/);
  });

  it('fails fast naming each bad variable', () => {
    expect(() => loadConfig({ PORT: 'eighty', RATE_LIMIT_PER_MINUTE: '0' })).toThrow(/PORT[\s\S]*RATE_LIMIT_PER_MINUTE/);
  });

  it('names the variable, the value given and what is allowed, in one line each', () => {
    const message = (env: Record<string, string>) => {
      try {
        loadConfig(env);
      } catch (error) {
        return (error as Error).message;
      }
      throw new Error(`${JSON.stringify(env)} was accepted`);
    };
    expect(message({ PORT: 'abc' })).toBe('Invalid configuration: PORT=abc: expected an integer from 0 to 65535');
    expect(message({ PORT: '70000' })).toBe('Invalid configuration: PORT=70000: expected an integer from 0 to 65535');
    expect(message({ DATABASE_POOL_SIZE: '2.5' })).toBe(
      'Invalid configuration: DATABASE_POOL_SIZE=2.5: expected an integer from 1 to 1000',
    );
    expect(message({ VALIDATE_RESPONSES: 'yes' })).toBe('Invalid configuration: VALIDATE_RESPONSES=yes: expected true, false, 1 or 0');
    expect(message({ LOG_LEVEL: 'verbose' })).toBe(
      'Invalid configuration: LOG_LEVEL=verbose: expected trace, debug, info, warn, error, fatal or silent',
    );
    expect(message({ OTEL_TRACES_EXPORTER: 'otlp,jaeger' })).toBe(
      'Invalid configuration: OTEL_TRACES_EXPORTER=otlp,jaeger: expected otlp, console, zipkin or none (comma-separated)',
    );
    expect(message({ HOST: '' })).toBe('Invalid configuration: HOST="": expected an address to listen on (127.0.0.1, 0.0.0.0, ::)');
    // A password in a URL is not repeated.
    expect(message({ DATABASE_URL: 'mysql://app:s3cret@db/petstore' })).toBe(
      'Invalid configuration: DATABASE_URL=mysql://app:***@db/petstore: expected a postgres:// or postgresql:// URL',
    );
    expect(message({ PORT: 'x', RATE_LIMIT_PER_MINUTE: '0' }).split('\n')).toEqual([
      'Invalid configuration:',
      '  PORT=x: expected an integer from 0 to 65535',
      '  RATE_LIMIT_PER_MINUTE=0: expected an integer from 1 to 1000000',
    ]);
  });

  it('mocks unimplemented operations only when asked, and never with NODE_ENV=production, in one line naming the setting', () => {
    expect(loadConfig({}).mockUnimplemented).toBe(false);
    expect(loadConfig({ MOCK_UNIMPLEMENTED: 'true' }).mockUnimplemented).toBe(true);
    expect(loadConfig({ MOCK_UNIMPLEMENTED: 'true', NODE_ENV: 'development' }).mockUnimplemented).toBe(true);
    expect(loadConfig({ MOCK_UNIMPLEMENTED: 'false', NODE_ENV: 'production' }).mockUnimplemented).toBe(false);
    expect(() => loadConfig({ MOCK_UNIMPLEMENTED: 'true', NODE_ENV: 'production' })).toThrow(
      /^Invalid configuration: MOCK_UNIMPLEMENTED=true: must not be on when NODE_ENV=production[^\n]*$/,
    );
  });

  it('refuses a headers timeout longer than the request timeout', () => {
    expect(() => loadConfig({ HEADERS_TIMEOUT_MS: '5000', REQUEST_TIMEOUT_MS: '1000' })).toThrow(/HEADERS_TIMEOUT_MS/);
  });

  it('serves metrics only on a port of their own, off unless METRICS_PORT names one', () => {
    expect(loadConfig({}).metrics).toBeUndefined();
    expect(loadConfig({ METRICS_PORT: '0' }).metrics).toBeUndefined();
    expect(loadConfig({ METRICS_PORT: '9464' }).metrics).toEqual({ port: 9464, host: '127.0.0.1' });
    expect(() => loadConfig({ PORT: '8080', METRICS_PORT: '8080' })).toThrow(/METRICS_PORT=8080: must not be the API port/);
  });

  it('traces only when the OTEL_* variables name an exporter or an OTLP endpoint', () => {
    const endpoint = 'http://collector:4318';
    expect(loadConfig({}).tracing).toBe(false);
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: '' }).tracing).toBe(false);
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint }).tracing).toBe(true);
    expect(loadConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${endpoint}/v1/traces` }).tracing).toBe(true);
    expect(loadConfig({ OTEL_TRACES_EXPORTER: 'console' }).tracing).toBe(true);
    expect(loadConfig({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: endpoint }).tracing).toBe(false);
    expect(loadConfig({ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: endpoint }).tracing).toBe(false);
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT/);
    expect(() => loadConfig({ OTEL_TRACES_EXPORTER: 'jaeger' })).toThrow(/OTEL_TRACES_EXPORTER/);
  });

  it('reads the sampler as the OpenTelemetry specification names it, parentbased_always_on unless set', () => {
    const sampler = (name?: string, arg?: string) =>
      loadConfig({ ...(name !== undefined && { OTEL_TRACES_SAMPLER: name }), ...(arg !== undefined && { OTEL_TRACES_SAMPLER_ARG: arg }) })
        .traceSampler;
    expect(sampler()).toEqual({ ratio: 1, parentBased: true });
    expect(sampler('')).toEqual({ ratio: 1, parentBased: true });
    expect(sampler('parentbased_traceidratio', '0.01')).toEqual({ ratio: 0.01, parentBased: true });
    // The ratio samplers keep every trace without an argument.
    expect(sampler('traceidratio')).toEqual({ ratio: 1, parentBased: false });
    expect(sampler('parentbased_always_off', '0.5')).toEqual({ ratio: 0, parentBased: true });
    expect(sampler('always_on')).toEqual({ ratio: 1, parentBased: false });
    expect(sampler('always_off')).toEqual({ ratio: 0, parentBased: false });
    expect(() => sampler('jaeger_remote')).toThrow(/OTEL_TRACES_SAMPLER=jaeger_remote: expected always_on/);
    expect(() => sampler('traceidratio', '1.5')).toThrow(/OTEL_TRACES_SAMPLER_ARG=1.5: expected a ratio from 0 to 1/);
    expect(() => sampler('traceidratio', 'half')).toThrow(/OTEL_TRACES_SAMPLER_ARG=half: expected a ratio/);
  });

  it('documents every variable in the configuration table (docs/configuration.md)', () => {
    const table = readFileSync(join(__dirname, '..', 'docs', 'configuration.md'), 'utf8');
    expect(configVariables.filter((name) => !table.includes(`| \`${name}\` |`))).toEqual([]);
    expect(configVariables).toEqual(
      expect.arrayContaining(['MAX_CONNECTIONS', 'HEADERS_TIMEOUT_MS', 'REQUEST_TIMEOUT_MS', 'KEEP_ALIVE_TIMEOUT_MS']),
    );
  });
});
