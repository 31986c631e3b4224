// npm run bench, the metrics part: GET /pets/{petId} on the service with
// metrics off (the default), on a second process also off (so the noise of the
// comparison shows), and with metrics on (METRICS_PORT; tracing off), scraped every
// 5 s as Prometheus would. The target: on keeps >= 0.95x of off's throughput, judged by
// requests per CPU second of the service (off-on.ts says why; req/s is printed too). Each
// server is the built service as `npm start` runs it, with a database of its own; rounds
// are interleaved and ratios are medians of per-round ratios, as in throughput.ts.
// Alone: `npm run build && npx tsx scripts/bench/metrics-cost.ts`.
import { freePort } from './common';
import { compareOffOn, connections, durationS, rounds, warmupS } from './off-on';

const scrapeEveryMs = 5_000;
const target = 0.95;

/** Scrapes GET /metrics every few seconds while the load runs; counts the scrapes that answered 200. */
function scraper(port: number): { stop: () => Promise<number> } {
  let scrapes = 0;
  let last: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    last = fetch(`http://127.0.0.1:${port}/metrics`).then(
      async (res) => {
        await res.text();
        if (res.ok) scrapes++;
      },
      () => undefined,
    );
  }, scrapeEveryMs);
  return {
    async stop() {
      clearInterval(timer);
      await last;
      return scrapes;
    },
  };
}

export async function benchMetricsCost(): Promise<void> {
  const metricsPort = await freePort();
  const scrapes = scraper(metricsPort);
  try {
    console.log(
      `\nMetrics: GET /pets/1, ${connections} connections, ${warmupS} s warm-up, ${rounds} interleaved rounds of ${durationS} s; ` +
        `metrics off, off again (a second process: the noise), and on (METRICS_PORT, tracing off, scraped every ${scrapeEveryMs / 1000} s).`,
    );
    const { noise, cost, cpuNoise, cpuCost, cpuNoiseRounds, cpuCostRounds } = await compareOffOn('metrics', {
      METRICS_PORT: String(metricsPort),
    });
    console.log('\n| ratio (median of rounds) | req/s | requests per CPU second | target |');
    console.log('|---|---|---|---|');
    console.log(
      `| off again / off (the noise: the same build, metrics off in both) | ${noise.toFixed(2)} | ${cpuNoise.toFixed(2)} (rounds ${cpuNoiseRounds}) | |`,
    );
    console.log(
      `| on / off (every request timed and counted, scraped) | ${cost.toFixed(2)} | ${cpuCost.toFixed(2)} (rounds ${cpuCostRounds}) | ` +
        `>= ${target} per CPU second ${cpuCost >= target ? 'met' : 'NOT met'} |`,
    );
    console.log(`(${await scrapes.stop()} scrapes of GET /metrics answered 200 during the run)`);
  } finally {
    await scrapes.stop();
  }
}

if (require.main === module) {
  benchMetricsCost().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
