// Renders /docs in a real Chromium with the network cut off at 127.0.0.1 and
// checks what a reader sees. Run with `npm run test:browser`; needs
// /usr/bin/chromium (scripts/ensure-chromium.sh installs it).
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { parse } from 'yaml';
import { createDatabase } from '../../db/client';
import { createApp } from '../../server/app';
import { operationsOf, type OpenApiDocument } from '../../server/spec';
import { testConfig } from '../helpers';

const ROOT = path.join(__dirname, '..', '..');
const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOT = path.join(ROOT, 'artifacts', 'docs.png');

type Spec = Record<string, unknown>;
type Operation = {
  path: string;
  method: string;
  operationId: string;
  tag: string;
  deprecated?: boolean;
  'x-stability'?: string;
  'x-deprecated-sunset'?: string;
  'x-hideTryItPanel'?: boolean;
};

// The project compiles without the DOM library; this is the little of it that
// the code run inside the page touches.
type BrowserGlobal = {
  __cspViolations: string[];
  document: {
    addEventListener(type: 'securitypolicyviolation', listener: (event: { violatedDirective: string; blockedURI: string }) => void): void;
  };
};

function loadSpec(): Spec {
  return parse(fs.readFileSync(path.join(ROOT, 'openapi.yaml'), 'utf8')) as Spec;
}

/** Every operation, from the one operation table, with its own extensions looked up. */
function operationsIn(spec: Spec): Operation[] {
  const paths = spec.paths as Record<string, Record<string, Record<string, unknown>>>;
  return Object.entries(operationsOf(spec as OpenApiDocument)).map(([operationId, { path: opPath, method, tag }]) => ({
    ...(paths[opPath]?.[method] as Omit<Operation, 'path' | 'method' | 'tag'>),
    operationId,
    path: opPath,
    method,
    tag,
  }));
}

// The real app serves /docs and /openapi.json. Serving another spec swaps in an app
// built from it, as a restart with an edited openapi.yaml would.
async function startDocsServer(initialSpec: Spec) {
  const db = createDatabase(path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'petstore-docs-')), 'petstore.db'));
  const appFor = (spec: Spec) => createApp({ db, config: testConfig(), spec: spec as OpenApiDocument });
  let app = appFor(initialSpec);
  const server = http.createServer((req, res) => app(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    serveSpec(spec: Spec) {
      app = appFor(spec);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

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

function assertEqual<T>(actual: T, expected: T, what: string): void {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) throw new Error(`${what}: expected ${e}, got ${a}`);
}

function opBlock(page: Page, op: Operation) {
  return page.locator(`[id="operations-${op.tag}-${op.operationId}"]`);
}

// Expanding an operation makes Swagger UI resolve it; the responses table is
// the last thing it renders, so its presence means the body is complete.
async function expand(page: Page, op: Operation) {
  const block = opBlock(page, op);
  await block.scrollIntoViewIfNeeded();
  if (!(await block.evaluate((el) => el.classList.contains('is-open')))) {
    await block.locator('.opblock-summary-control').click();
  }
  await block.locator('.responses-wrapper').waitFor({ state: 'visible' });
  return block;
}

async function main(): Promise<void> {
  const spec = loadSpec();
  const operations = operationsIn(spec);
  const find = (method: string, opPath: string): Operation => {
    const op = operations.find((o) => o.method === method && o.path === opPath);
    if (!op) throw new Error(`${method.toUpperCase()} ${opPath} is not in openapi.yaml`);
    return op;
  };

  const server = await startDocsServer(spec);
  let browser: Browser | undefined;
  const offHostRequests: string[] = [];
  const pageErrors: string[] = [];

  try {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
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
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.route('**/*', async (route) => {
      const url = new URL(route.request().url());
      if (url.hostname === '127.0.0.1') return route.continue();
      offHostRequests.push(route.request().url());
      return route.abort('blockedbyclient');
    });
    // CSP stops a CDN request before it reaches the network, so the route above
    // would never see it: collect the violations as well.
    await context.addInitScript(() => {
      const violations: string[] = [];
      const browserGlobal = globalThis as unknown as BrowserGlobal;
      browserGlobal.__cspViolations = violations;
      browserGlobal.document.addEventListener('securitypolicyviolation', (e) => {
        violations.push(`${e.violatedDirective} ${e.blockedURI}`);
      });
    });
    const page = await context.newPage();
    page.setDefaultTimeout(15_000);
    page.on('pageerror', (error) => pageErrors.push(error.message));
    page.on('console', (message) => {
      if (message.type() === 'error') pageErrors.push(message.text());
    });

    const response = await page.goto(`${server.url}/docs`);
    await page.locator('.opblock-tag').first().waitFor();

    await check('GET /docs answers 200 with a self-only Content-Security-Policy', async () => {
      assert(response, 'no response for /docs');
      assertEqual(response.status(), 200, 'status of GET /docs');
      const csp = (await response.allHeaders())['content-security-policy'] ?? '';
      assert(csp.includes("default-src 'self'"), `CSP lacks default-src 'self': "${csp}"`);
      assert(csp.includes("script-src 'self'") && !/script-src[^;]*unsafe-inline/.test(csp), `CSP allows more than own scripts: "${csp}"`);
    });

    await check('the operations come first: the first one is on the first screen, the rules folded above it', async () => {
      const first = page.locator('.opblock').first();
      const box = await first.boundingBox();
      assert(box, 'no operation is laid out');
      assert(box.y + box.height <= 900, `the first operation ends at y=${Math.round(box.y + box.height)}, below the first screen (900 px)`);
      const rules = page.locator('details#api-rules');
      assertEqual(await rules.count(), 1, 'folded rules sections');
      assertEqual(await rules.evaluate((el) => el.hasAttribute('open')), false, 'rules open on arrival');
      assert(!(await rules.locator('.api-rules__body').isVisible()), 'the rules are visible before a click');
      const rulesBox = await rules.boundingBox();
      assert(rulesBox && rulesBox.y < box.y, 'the rules are not above the operations');
    });

    await check('the rules are one click away, all of info.description, its sections named in the summary', async () => {
      const description = (spec.info as { description: string }).description;
      const sections = [...description.matchAll(/^## +(.+)$/gm)].map((m) => (m[1] as string).trim());
      assert(sections.includes('Order of checks'), `info.description has no "Order of checks" section: ${sections.join(', ')}`);
      const summary = page.locator('details#api-rules > summary');
      assertEqual((await summary.innerText()).trim(), `Rules for every operation: ${sections.join(', ')}`, 'summary');
      await summary.click();
      const body = page.locator('details#api-rules .api-rules__body');
      await body.waitFor({ state: 'visible' });
      const headings = await body.locator('h2').evaluateAll((els) => els.map((el) => el.textContent?.trim()));
      assertEqual(headings, sections, 'headings shown after the click');
      // The info block shows it once: not also above the fold.
      assertEqual(
        await page.locator('.information-container h2:text-is("Order of checks")').count(),
        1,
        '"Order of checks" headings on the page',
      );
      await summary.click();
      await body.waitFor({ state: 'hidden' });
    });

    const tags = spec.tags as Array<{ name: string; 'x-parent'?: string }>;
    const childrenOf = (parent: string) => tags.filter((t) => t['x-parent'] === parent).map((t) => t.name);

    for (const parent of ['Pets', 'Store']) {
      await check(`navigation group ${parent} has a heading with ${childrenOf(parent).join(', ')} under it`, async () => {
        const expected = childrenOf(parent);
        assert(expected.length > 0, `openapi.yaml declares no tag with x-parent: ${parent}`);
        const group = page.locator(`section.tag-group[data-tag-group="${parent}"]`);
        assertEqual(await group.count(), 1, `number of ${parent} groups`);
        const heading = group.locator('h2.tag-group__title');
        assert(await heading.isVisible(), `${parent} group heading is not visible`);
        assertEqual((await heading.innerText()).trim(), parent, 'group heading text');
        const children = await group.locator('.opblock-tag[data-tag]').evaluateAll((els) => els.map((el) => el.getAttribute('data-tag')));
        assertEqual(children, expected, `tags inside the ${parent} group`);
        // Visibly under it: below the heading and indented from it.
        const headingBox = await heading.boundingBox();
        const childBox = await group.locator('.opblock-tag').first().boundingBox();
        assert(headingBox && childBox, `${parent} group is not laid out`);
        assert(childBox.y > headingBox.y, `${parent}'s first child is not below its heading`);
        assert(childBox.x >= headingBox.x + 16, `${parent}'s children are not indented (heading x=${headingBox.x}, child x=${childBox.x})`);
      });
    }

    await check('parent tags are headings only; ungrouped tags stay outside the groups', async () => {
      const sections = await page
        .locator('.opblock-tag[data-tag]')
        .evaluateAll((els) => els.map((el) => ({ tag: el.getAttribute('data-tag'), grouped: !!el.closest('section.tag-group') })));
      const names = sections.map((s) => s.tag);
      assert(!names.includes('Pets') && !names.includes('Store'), `a parent tag rendered as an operation list: ${names.join(', ')}`);
      for (const tag of ['accounts', 'messages', 'service']) {
        const section = sections.find((s) => s.tag === tag);
        assert(section, `tag ${tag} is missing from the page`);
        assert(!section.grouped, `tag ${tag} has no x-parent but sits inside a group`);
      }
    });

    const deprecated = find('get', '/pets/{petId}');
    await check('GET /pets/{petId} shows its deprecation with the sunset date from x-deprecated-sunset', async () => {
      assertEqual(deprecated['x-deprecated-sunset'], '2027-06-30', 'x-deprecated-sunset in openapi.yaml');
      const notice = opBlock(page, deprecated).locator('.opblock-summary .deprecation-notice');
      assert(await notice.isVisible(), 'no visible deprecation notice on GET /pets/{petId}');
      const text = await notice.innerText();
      assert(/deprecated/i.test(text) && text.includes('2027-06-30'), `deprecation notice reads "${text}"`);
      const total = await page.locator('.deprecation-notice').count();
      const expected = operations.filter((o) => o.deprecated === true).length;
      assertEqual(total, expected, 'number of deprecation notices (deprecated operations in the spec)');
    });

    const stabilityCases: Array<[string, string, string]> = [
      ['put', '/store/inventory/{petId}', 'beta'],
      ['post', '/messages', 'experimental'],
    ];
    for (const [method, opPath, level] of stabilityCases) {
      await check(`${method.toUpperCase()} ${opPath} shows a visible ${level} badge`, async () => {
        const badge = opBlock(page, find(method, opPath)).locator('.opblock-summary .stability-badge');
        assertEqual(await badge.count(), 1, `badges on ${method.toUpperCase()} ${opPath}`);
        assert(await badge.isVisible(), `${level} badge is not visible`);
        assertEqual((await badge.innerText()).trim(), level, 'badge text');
      });
    }

    await check('stability badges appear exactly on the operations with x-stability', async () => {
      const shown = await page
        .locator('.opblock')
        .evaluateAll((els) => els.map((el) => el.querySelector('.stability-badge')?.textContent ?? null));
      const onPage = (await page.locator('.opblock').evaluateAll((els) => els.map((el) => el.id)))
        .map((id, i) => `${id}=${shown[i] ?? '-'}`)
        .sort();
      const fromSpec = operations.map((o) => `operations-${o.tag}-${o.operationId}=${o['x-stability'] ?? '-'}`).sort();
      assertEqual(onPage, fromSpec, 'badge per operation');
    });

    fs.mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });

    const listPets = find('get', '/pets');
    await check('GET /pets has a working Try it out button', async () => {
      const block = await expand(page, listPets);
      const button = block.locator('button.try-out__btn');
      assertEqual(await button.count(), 1, 'try-it buttons on GET /pets');
      await button.click();
      await block.locator('button.execute').waitFor({ state: 'visible' });
    });

    const listOrders = find('get', '/store/orders');
    await check('GET /store/orders (x-hideTryItPanel) has no try-it button or execute control at all', async () => {
      assertEqual(listOrders['x-hideTryItPanel'], true, 'x-hideTryItPanel in openapi.yaml');
      const block = await expand(page, listOrders);
      assert(await block.locator('.parameters-container').isVisible(), 'GET /store/orders did not render its parameters');
      assertEqual(await block.locator('.try-out, .try-out__btn').count(), 0, 'try-it elements on GET /store/orders');
      assertEqual(await block.locator('button.execute').count(), 0, 'execute buttons on GET /store/orders');
    });

    await check('every other operation has its try-it button', async () => {
      const missing: string[] = [];
      for (const op of operations) {
        const block = await expand(page, op);
        const has = (await block.locator('button.try-out__btn').count()) === 1;
        if (has === (op['x-hideTryItPanel'] === true)) {
          missing.push(`${op.method.toUpperCase()} ${op.path} ${has ? 'has' : 'lacks'} a try-it button`);
        }
      }
      assertEqual(missing, [], 'operations whose try-it button disagrees with x-hideTryItPanel');
    });

    await check('the sunset date follows the spec (not hard-coded in the page)', async () => {
      const altered = structuredClone(spec) as { paths: Record<string, Record<string, Record<string, unknown>>> };
      altered.paths['/pets/{petId}']!.get!['x-deprecated-sunset'] = '2031-01-15';
      server.serveSpec(altered);
      try {
        await page.reload();
        const notice = opBlock(page, deprecated).locator('.deprecation-notice');
        await notice.waitFor();
        const text = await notice.innerText();
        assert(
          text.includes('2031-01-15') && !text.includes('2027-06-30'),
          `with the sunset changed in the spec the notice reads "${text}"`,
        );
      } finally {
        server.serveSpec(spec);
      }
    });

    await check('no request left 127.0.0.1, nothing was blocked by the CSP, no script errors', async () => {
      const violations = await page.evaluate(() => (globalThis as unknown as BrowserGlobal).__cspViolations);
      assertEqual(offHostRequests, [], 'requests to hosts other than 127.0.0.1');
      assertEqual(violations, [], 'Content-Security-Policy violations');
      assertEqual(pageErrors, [], 'page errors');
    });
  } finally {
    await browser?.close();
    await server.close();
  }
}

main()
  .catch((error: unknown) => {
    // Chromium missing, the server not starting...: one failure, not a silent pass.
    console.error(error);
    results.failed += 1;
  })
  .finally(() => {
    console.log(`\n${results.passed} passed, ${results.failed} failed`);
    process.exitCode = results.failed === 0 ? 0 : 1;
  });
