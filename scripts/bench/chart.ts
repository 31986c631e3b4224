// The picture of npm run bench's open-loop part (scripts/bench/open-loop.ts), as plain SVG
// written here: the service beside the naive app, Fastify and bare Express, their CPU per
// request on the left, their p50 and p99 at each fixed rate on the right (a log scale:
// tails and medians differ a hundredfold). docs/performance.md shows the latest one.

export interface ChartServer {
  name: string;
  /** µs of CPU per request. */
  cpuUs: number;
  /** At each rate, ms; Number.MAX_VALUE when the run did not reach that percentile. */
  latency: Array<{ rate: number; p50: number; p99: number }>;
}

const colours = ['#d9480f', '#1c7ed6', '#2b8a3e', '#868e96'];
const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export function chart(servers: ChartServer[], caption: string): string {
  const width = 900;
  const height = 380;
  const top = 60;
  const bottom = 300;
  const out: string[] = [];
  const text = (x: number, y: number, s: string, attrs = '') =>
    out.push(`<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" ${attrs}>${escape(s)}</text>`);
  const rect = (x: number, y: number, w: number, h: number, fill: string, extra = '') =>
    out.push(
      `<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${w.toFixed(1)}" height="${Math.max(0, h).toFixed(1)}" fill="${fill}" ${extra}/>`,
    );

  // Left: CPU per request, linear.
  const left = { x: 50, w: 300 };
  const cpuMax = Math.max(...servers.map((s) => (Number.isFinite(s.cpuUs) ? s.cpuUs : 0)), 1) * 1.15;
  text(left.x, top - 25, 'CPU per request (µs), lower is better', 'font-weight="bold"');
  const barW = left.w / servers.length;
  servers.forEach((s, i) => {
    const v = Number.isFinite(s.cpuUs) ? s.cpuUs : 0;
    const h = ((bottom - top) * v) / cpuMax;
    rect(left.x + i * barW + 8, bottom - h, barW - 16, h, colours[i % colours.length]!);
    text(left.x + i * barW + barW / 2, bottom - h - 5, Number.isFinite(s.cpuUs) ? s.cpuUs.toFixed(0) : '-', 'text-anchor="middle"');
  });
  out.push(`<line x1="${left.x}" y1="${bottom}" x2="${left.x + left.w}" y2="${bottom}" stroke="#333"/>`);

  // Right: p50 (light) and p99 (solid) per rate, log scale from 0.1 to the largest.
  const right = { x: 430, w: 440 };
  const finite = servers.flatMap((s) => s.latency.flatMap((l) => [l.p50, l.p99])).filter((v) => v > 0 && v < Number.MAX_VALUE);
  const lo = 0.1;
  const hi = Math.max(1, ...finite) * 2;
  const y = (ms: number) => bottom - ((bottom - top) * (Math.log10(Math.max(ms, lo)) - Math.log10(lo))) / (Math.log10(hi) - Math.log10(lo));
  text(right.x, top - 25, 'Latency at a fixed rate (ms, log): p50 light, p99 solid', 'font-weight="bold"');
  for (let tick = lo; tick <= hi; tick *= 10) {
    out.push(`<line x1="${right.x}" y1="${y(tick).toFixed(1)}" x2="${right.x + right.w}" y2="${y(tick).toFixed(1)}" stroke="#ddd"/>`);
    text(right.x - 5, y(tick) + 4, String(Number(tick.toPrecision(1))), 'text-anchor="end"');
  }
  const rates = servers[0]?.latency.map((l) => l.rate) ?? [];
  const groupW = right.w / Math.max(1, rates.length);
  const w = (groupW - 30) / servers.length / 2;
  rates.forEach((rate, r) => {
    const gx = right.x + r * groupW + 15;
    servers.forEach((s, i) => {
      const l = s.latency[r];
      if (!l) return;
      const colour = colours[i % colours.length]!;
      const x = gx + i * 2 * w;
      const p50 = l.p50 === Number.MAX_VALUE ? hi : l.p50;
      const p99 = l.p99 === Number.MAX_VALUE ? hi : l.p99;
      rect(x, y(p50), w - 1, bottom - y(p50), colour, 'fill-opacity="0.4"');
      rect(x + w, y(p99), w - 1, bottom - y(p99), colour);
      text(
        x + w * 1.5,
        y(p99) - 4,
        l.p99 === Number.MAX_VALUE ? '>' : l.p99 < 10 ? l.p99.toFixed(1) : l.p99.toFixed(0),
        'text-anchor="middle" font-size="10"',
      );
    });
    text(gx + (groupW - 30) / 2, bottom + 18, `${rate} req/s`, 'text-anchor="middle"');
  });
  out.push(`<line x1="${right.x}" y1="${bottom}" x2="${right.x + right.w}" y2="${bottom}" stroke="#333"/>`);

  // Legend and caption.
  servers.forEach((s, i) => {
    const lx = 50 + i * 215;
    rect(lx, bottom + 38, 12, 12, colours[i % colours.length]!);
    text(lx + 18, bottom + 49, s.name);
  });
  text(50, height - 12, caption, 'font-size="11" fill="#555"');
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    ...out,
    '</svg>',
    '',
  ].join('\n');
}
