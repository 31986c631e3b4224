// The packed client (@petstore/client) in a web page, in a real headless Chromium: a
// browser project installs the tarball, strict tsc compiles it with the DOM's types and no
// Node types, esbuild bundles it for the browser, and a page served from another origin
// calls the service through it, the service started with that origin in CORS_ORIGINS.
// The same page from an origin not in the list must fail, so the pass is CORS's doing.
// Run with `npm run test:browser`; needs /usr/bin/chromium (scripts/ensure-chromium.sh).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { buildSync } from 'esbuild';
import { chromium, type Browser } from 'playwright-core';
import { repoRoot, startServer, type ServerProcess } from '../../scripts/server-process';
import { compile, consumerProject, packClient, pageMainSource, roundSource, strictOptions } from '../client-consumer';

const CHROMIUM = '/usr/bin/chromium';

const results = { passed: 0, failed: 0 };
async function check(name: string, run: () => Promise<void>): Promise<void> {
  try {
    await run();
    results.passed += 1;
    console.log(`ok   ${name}`);
  } catch (error) {
    results.failed += 1;
    console.log(`FAIL ${name}\n     ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`);
  }
}

function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(message);
}

/** Serves the page and its bundle from 127.0.0.1 on a port of its own: an origin apart from the service's. */
async function startPageServer(files: Record<string, [string, string]>) {
  const server = http.createServer((req, res) => {
    const file = files[(req.url ?? '/').split('?')[0] ?? '/'];
    if (!file) return res.writeHead(404).end();
    res.writeHead(200, { 'Content-Type': file[0] }).end(file[1]);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { origin: `http://127.0.0.1:${port}`, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'petstore-client-browser-'));
  let browser: Browser | undefined;
  let service: ServerProcess | undefined;
  const closers: Array<() => Promise<void>> = [];
  try {
    const { tarball } = packClient(dir);
    const project = path.join(dir, 'web');
    consumerProject(project, tarball, {
      'package.json': { name: 'consumer-web', private: true, type: 'module' },
      'tsconfig.json': {
        compilerOptions: {
          ...strictOptions,
          module: 'preserve',
          moduleResolution: 'bundler',
          lib: ['ES2022', 'DOM', 'DOM.Iterable'],
          types: [],
          noEmit: true,
        },
        include: ['src'],
      },
      'src/round.ts': roundSource,
      'src/page.ts': pageMainSource,
    });

    await check('the page compiles under strict tsc with the DOM types and no Node types', async () => {
      const { output } = compile(project);
      assert(output === '', `tsc: ${output}`);
    });

    let bundle = '';
    await check('esbuild bundles it for the browser, the client and openapi-fetch inside', async () => {
      const built = buildSync({
        entryPoints: [path.join(project, 'src', 'page.ts')],
        absWorkingDir: project,
        bundle: true,
        platform: 'browser',
        format: 'esm',
        target: 'chrome120',
        write: false,
        logLevel: 'silent',
      });
      bundle = built.outputFiles[0]?.text ?? '';
      assert(bundle.includes('function createPetStoreClient') && bundle.includes('function basicAuth'), 'the bundle lacks the client');
    });

    const page = {
      '/': [
        'text/html; charset=utf-8',
        '<!doctype html><title>consumer</title><pre id="result" data-state="running"></pre><script type="module" src="/page.js"></script>',
      ],
      '/page.js': ['text/javascript', bundle],
    } satisfies Record<string, [string, string]>;
    const allowed = await startPageServer(page);
    closers.push(allowed.close);
    const other = await startPageServer(page);
    closers.push(other.close);

    execFileSync(process.execPath, [path.join(repoRoot, 'scripts', 'build.mjs')], { cwd: repoRoot, stdio: 'inherit' });
    service = await startServer({ DATABASE_PATH: path.join(dir, 'petstore.db'), CORS_ORIGINS: allowed.origin });
    const api = service.url;

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      // Playwright gives every launch a fresh profile of its own (a new --user-data-dir).
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    const context = await browser.newContext();
    const offHost: string[] = [];
    await context.route('**/*', async (route) => {
      if (new URL(route.request().url()).hostname === '127.0.0.1') return route.continue();
      offHost.push(route.request().url());
      return route.abort('blockedbyclient');
    });

    const password = 'pässwörd für Hunde 🐕';
    const runPage = async (origin: string, email: string) => {
      const tab = await context.newPage();
      const errors: string[] = [];
      tab.on('pageerror', (error) => errors.push(error.message));
      const query = new URLSearchParams({ api, email, password });
      await tab.goto(`${origin}/?${query.toString()}`);
      const result = tab.locator('#result:not([data-state="running"])');
      await result.waitFor({ timeout: 20_000 });
      const outcome = { state: await result.getAttribute('data-state'), text: await result.innerText(), errors };
      await tab.close();
      return outcome;
    };

    await check(
      `a page from ${allowed.origin} (in CORS_ORIGINS) signs up, gets a key over Basic, lists pets and meets a typed 409`,
      async () => {
        const email = `browser-${Date.now()}@example.com`;
        const { state, text, errors } = await runPage(allowed.origin, email);
        assert(errors.length === 0, `page errors: ${errors.join('; ')}`);
        assert(state === 'done', `the page reports ${state}: ${text}`);
        const got = JSON.parse(text) as Record<string, unknown>;
        const want = { account: email, role: 'customer', keyPrefix: 'ps_live_', refused: 409, code: 'insufficient_stock' };
        for (const [key, value] of Object.entries(want))
          assert(got[key] === value, `${key}: expected ${JSON.stringify(value)}, got ${JSON.stringify(got[key])}`);
        assert(typeof got.pets === 'number' && got.pets > 0 && typeof got.petName === 'string', `no pets listed: ${text}`);
        // Readable cross-origin only because the service names them in Access-Control-Expose-Headers.
        assert(typeof got.requestId === 'string' && /^[0-9a-f-]{36}$/.test(got.requestId), `X-Request-Id not readable: ${text}`);
        assert(typeof got.rateLimit === 'string' && got.rateLimit.includes('"address"'), `RateLimit not readable: ${text}`);
      },
    );

    await check(`the same page from ${other.origin} (not in CORS_ORIGINS) is refused by the browser`, async () => {
      const { state, text } = await runPage(other.origin, `browser-other-${Date.now()}@example.com`);
      assert(state === 'failed' && /Failed to fetch/.test(text), `the page reports ${state}: ${text}`);
    });

    await check('no request left 127.0.0.1', async () => {
      assert(offHost.length === 0, `requests to other hosts: ${offHost.join(', ')}`);
    });
  } finally {
    await browser?.close();
    await service?.stop();
    for (const close of closers) await close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main()
  .catch((error: unknown) => {
    // Chromium missing, npm or the server failing...: one failure, not a silent pass.
    console.error(error);
    results.failed += 1;
  })
  .finally(() => {
    console.log(`\n${results.passed} passed, ${results.failed} failed`);
    process.exitCode = results.failed === 0 ? 0 : 1;
  });
