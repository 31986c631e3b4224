// npm run bench: pagination cost (in process), then throughput and latency of the
// service beside reference servers (separate processes), then metrics off beside on,
// then tracing off beside on,
// then the shapes beyond one process by CPU per request: WEB_CONCURRENCY=2 beside one
// process, PostgreSQL (a throwaway server unless BENCH_PG_URL names one) beside SQLite,
// one instance beside two, then where compressing an answer pays, then latency at fixed
// rates (open loop) and its chart. See docs/performance.md; scripts/bench/ holds the parts.
// A variant of its own, `npm run bench:scale` (scripts/bench/data-scale.ts): every list
// operation and filter at 1M pets and 1M orders, and what one customer's key can cost.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { benchCompression } from './bench/compression';
import { benchLoginBurst } from './bench/login-burst';
import { benchOpenLoop } from './bench/open-loop';
import { benchOverload } from './bench/overload';
import { benchMetricsCost } from './bench/metrics-cost';
import { benchPagination } from './bench/pagination';
import { benchThroughput } from './bench/throughput';
import { benchTracingCost } from './bench/tracing-cost';

/** Why the PostgreSQL part cannot run here, or null when it can. */
function postgresUnavailable(): string | null {
  if (process.env.BENCH_SKIP_POSTGRES === '1') return 'BENCH_SKIP_POSTGRES=1';
  if (process.env.BENCH_PG_URL) return null;
  if (process.platform !== 'linux') return 'scripts/with-postgres.sh needs Linux (set BENCH_PG_URL to use a running server)';
  const lib = '/usr/lib/postgresql';
  const installed = existsSync(lib) && readdirSync(lib).some((v) => existsSync(join(lib, v, 'bin', 'initdb')));
  if (installed) return null;
  // scripts/with-postgres.sh installs Debian's package with apt when it is missing.
  if (spawnSync('apt-get', ['--version']).status !== 0)
    return "PostgreSQL is not installed and there is no apt-get to install Debian's package";
  return null;
}

/** The service's shapes beyond one process (scripts/bench/postgres.ts), on a throwaway PostgreSQL unless BENCH_PG_URL names one. */
function benchShapes(): void {
  const part = [process.execPath, '--import', 'tsx', join(__dirname, 'bench', 'postgres.ts')];
  const quoted = part.map((w) => `'${w.replace(/'/g, `'\\''`)}'`).join(' ');
  const why = postgresUnavailable();
  const { BENCH_PG_URL: _, ...withoutPg } = process.env;
  const run =
    process.env.BENCH_PG_URL || why
      ? spawnSync(part[0] as string, part.slice(1), { stdio: 'inherit', env: why ? withoutPg : process.env })
      : spawnSync('bash', [join(__dirname, 'with-postgres.sh'), 'bash', '-c', `BENCH_PG_URL="$PG_URL" ${quoted}`], { stdio: 'inherit' });
  if (why) console.log(`PostgreSQL: skipped (${why}).`);
  if (run.status !== 0) console.log(`\nShapes: failed (the part exited with ${run.status ?? run.signal}; its output is above).`);
}

async function main(): Promise<void> {
  if (process.env.BENCH_SKIP_PAGINATION !== '1') await benchPagination();
  await benchThroughput();
  if (process.env.BENCH_SKIP_METRICS !== '1') await benchMetricsCost();
  if (process.env.BENCH_SKIP_TRACING !== '1') await benchTracingCost();
  if (process.env.BENCH_SKIP_OVERLOAD !== '1') await benchOverload();
  if (process.env.BENCH_SKIP_LOGIN_BURST !== '1') await benchLoginBurst();
  console.log('');
  benchShapes();
  if (process.env.BENCH_SKIP_COMPRESSION !== '1') await benchCompression();
  if (process.env.BENCH_SKIP_OPEN_LOOP !== '1') await benchOpenLoop();
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
