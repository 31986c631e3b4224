// npm run bench, the tracing part: GET /pets/{petId} on the service with tracing off (the
// default), on a second process also off (so the noise of the comparison shows), and with
// tracing on, exporting its spans over OTLP/HTTP (protobuf) to a receiver in this process
// that discards them, with a sampler that keeps 1% of new traces (OTEL_TRACES_SAMPLER, as
// docs/operations.md sets it up): the cost a service pays on every request to trace a
// sample of them; target: at least 0.95 of the requests per CPU second. Off, the request path has no tracing step (server/app.ts adds the
// middleware and the storage wrapper only when tracing); the off/off ratio is what "nothing
// measurable" is measured against. Each server is the built service as `npm start` runs
// it, with a database of its own; rounds are interleaved and ratios are medians of
// per-round ratios, as in throughput.ts. Alone: `npm run build && npx tsx scripts/bench/tracing-cost.ts`.
import { createServer as createHttpServer } from 'node:http';
import { compareOffOn, connections, durationS, rounds, warmupS } from './off-on';

/** An OTLP/HTTP receiver that counts the exports and discards them. */
async function startSink(): Promise<{ url: string; exports: () => number; close: () => Promise<void> }> {
  let exports = 0;
  const server = createHttpServer((req, res) => {
    req.resume();
    req.on('end', () => {
      exports++;
      res.writeHead(200, { 'Content-Type': req.headers['content-type'] ?? 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    exports: () => exports,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

export async function benchTracingCost(): Promise<void> {
  const sink = await startSink();
  try {
    console.log(
      `\nTracing: GET /pets/1, ${connections} connections, ${warmupS} s warm-up, ${rounds} interleaved rounds of ${durationS} s; ` +
        'tracing off, off again (a second process: the noise), and on (1% of traces sampled, their spans exported over OTLP/HTTP protobuf to a local sink).',
    );
    const { noise, cost, cpuNoise, cpuCost, cpuNoiseRounds, cpuCostRounds } = await compareOffOn('tracing', {
      OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.01',
    });
    console.log('\n| ratio (median of rounds) | req/s | requests per CPU second | target |');
    console.log('|---|---|---|---|');
    console.log(
      `| off again / off (the noise: the same build, tracing off in both) | ${noise.toFixed(2)} | ${cpuNoise.toFixed(2)} (rounds ${cpuNoiseRounds}) | |`,
    );
    console.log(
      `| on / off (1% of traces sampled and exported) | ${cost.toFixed(2)} | ${cpuCost.toFixed(2)} (rounds ${cpuCostRounds}) | >= 0.95 per CPU second ${cpuCost >= 0.95 ? 'met' : 'NOT met'} |`,
    );
    console.log(`(the sink received ${sink.exports()} OTLP exports)`);
  } finally {
    await sink.close();
  }
}

if (require.main === module) {
  benchTracingCost().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
