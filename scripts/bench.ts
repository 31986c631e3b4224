// npm run bench: pagination cost (in process), then throughput and latency of the
// service beside reference servers (separate processes), then metrics off beside on, then the service on PostgreSQL
// beside SQLite and one instance beside two. See the README's Performance section;
// scripts/bench/ holds the parts and the reference servers.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { benchMetricsCost } from './bench/metrics-cost';
import { benchPagination } from './bench/pagination';
import { benchThroughput } from './bench/throughput';

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

function benchPostgres(): void {
  const why = postgresUnavailable();
  if (why) {
    console.log(`\nPostgreSQL: skipped (${why}).`);
    return;
  }
  const part = [process.execPath, '--import', 'tsx', join(__dirname, 'bench', 'postgres.ts')];
  const quoted = part.map((w) => `'${w.replace(/'/g, `'\\''`)}'`).join(' ');
  const run = process.env.BENCH_PG_URL
    ? spawnSync(part[0] as string, part.slice(1), { stdio: 'inherit' })
    : spawnSync('bash', [join(__dirname, 'with-postgres.sh'), 'bash', '-c', `BENCH_PG_URL="$PG_URL" ${quoted}`], { stdio: 'inherit' });
  if (run.status !== 0) console.log(`\nPostgreSQL: skipped (its part exited with ${run.status ?? run.signal}; its output is above).`);
}

async function main(): Promise<void> {
  if (process.env.BENCH_SKIP_PAGINATION !== '1') await benchPagination();
  await benchThroughput();
  if (process.env.BENCH_SKIP_METRICS !== '1') await benchMetricsCost();
  console.log('');
  benchPostgres();
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
