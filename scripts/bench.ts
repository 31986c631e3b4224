// npm run bench: pagination cost (in process), then throughput and latency of the
// service beside reference servers (separate processes). See the README's Performance
// section; scripts/bench/ holds the parts and the reference servers.
import { benchPagination } from './bench/pagination';
import { benchThroughput } from './bench/throughput';

async function main(): Promise<void> {
  if (process.env.BENCH_SKIP_PAGINATION !== '1') await benchPagination();
  await benchThroughput();
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
