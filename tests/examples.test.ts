// openapi.yaml's examples stay true. Every request example, sent as it stands to a service
// started fresh (migrated, with the demo catalogue `npm start` loads into a brand-new
// database, so the ids the examples name exist), with the credentials and role its
// operation takes, is accepted; and no date in any example is less than five years ahead,
// so none expires unnoticed. (Response examples are checked against their schemas by
// `npm run generate`.)
import request from 'supertest';
import { seedDemoData } from '../db/seed';
import { dereferenced, loadSpec, operationsIn, operationsOf } from '../server/spec';
import { admin, customer, password, setupApp, type TestApp } from './helpers';

type Node = Record<string, unknown>;
interface Example {
  label: string;
  method: string;
  /** The path with its parameters filled from their examples. */
  path: string;
  /** The operation's path as the document writes it. */
  template: string;
  operationId: string;
  query: Record<string, unknown>;
  headers: Record<string, string>;
  body?: unknown;
}

const raw = loadSpec();
const spec = dereferenced(raw) as unknown as Node & { paths: Record<string, Node> };
const operations = operationsOf(raw);

/** A media type's or parameter's examples: its `example`, or each of its `examples`' values. */
const examplesOf = (node: Node): Array<[name: string, value: unknown]> =>
  node.example !== undefined
    ? [['example', node.example]]
    : Object.entries((node.examples ?? {}) as Record<string, Node>).map(([name, e]) => [name, e.value]);

/** The request examples of every operation, each a whole request built around it. */
function requestExamples(): Example[] {
  const out: Example[] = [];
  for (const { path, method, item, operation } of operationsIn(spec)) {
    const params = [...((item.parameters ?? []) as Node[]), ...((operation.parameters ?? []) as Node[])];
    const own = (p: Node) => examplesOf(p)[0]?.[1] ?? (p.schema as Node | undefined)?.example;
    const body = ((operation.requestBody as Node | undefined)?.content as Record<string, Node> | undefined)?.['application/json'];
    const bodies = body ? examplesOf(body) : [];
    // `given`: the parameter whose example this is, and that example.
    const build = (label: string, given: [Node, unknown] | undefined, bodyExample: unknown): Example => {
      const value = (p: Node) => (given && p === given[0] ? given[1] : own(p));
      const filled = path.replace(/\{([^}]+)\}/g, (_, name: string) => {
        const p = params.find((q) => q.in === 'path' && q.name === name);
        const v = p && value(p);
        if (v === undefined) throw new Error(`${method.toUpperCase()} ${path}: no example for the path parameter ${name}`);
        return encodeURIComponent(String(v));
      });
      const pick = (where: string) =>
        Object.fromEntries(
          params.flatMap((p) =>
            p.in === where && (p === given?.[0] || p.required === true) && value(p) !== undefined ? [[p.name, value(p)]] : [],
          ),
        );
      return {
        label: `${method.toUpperCase()} ${path}: ${label}`,
        method,
        path: filled,
        template: path,
        operationId: String(operation.operationId),
        query: pick('query'),
        headers: Object.fromEntries(Object.entries(pick('header')).map(([k, v]) => [k, String(v)])),
        body: bodyExample,
      };
    };
    for (const [name, value] of bodies) out.push(build(`request body ${name}`, undefined, value));
    for (const p of params) {
      for (const [name, value] of examplesOf(p))
        out.push(build(`${String(p.in)} parameter ${String(p.name)} ${name}`, [p, value], bodies[0]?.[1]));
    }
  }
  return out;
}

/** Sends one example as it stands, with the credentials its operation takes. */
async function send(t: TestApp, e: Example): Promise<request.Response> {
  const op = operations[e.operationId]!;
  const agent = request(t.app);
  let req = agent[e.method as 'get'](e.path)
    .query(e.query as Record<string, string>)
    .set(e.headers);
  if (op.security === 'basic') {
    const { email } = await customer(t.app);
    req = req.auth(email, password);
  } else if (op.security === 'bearer') {
    req = req.set((op.requiredRole === 'admin' ? await admin(t) : await customer(t.app)).auth);
  }
  return e.body === undefined ? req : req.send(e.body as object);
}

const examples = requestExamples();

describe('every request example in openapi.yaml', () => {
  it('is found: request bodies and parameters', () => {
    expect(examples.length).toBeGreaterThanOrEqual(10);
    expect(examples.map((e) => e.label)).toContain('POST /api-keys: request body example');
  });

  it.each(examples.map((e) => [e.label, e] as const))('%s is accepted by a fresh service', async (_label, example) => {
    const t = setupApp();
    await seedDemoData(t.repos);
    let res = await send(t, example);
    // An id the demo catalogue does not hold (an order): made by the example of the
    // operation that creates it, the POST on the collection above.
    const collection = example.template.slice(0, example.template.lastIndexOf('/{'));
    const producer = examples.find((e) => e.method === 'post' && e.template === collection);
    if (res.status === 404 && producer) {
      const made = await send(t, producer);
      expect(`${producer.label}: ${made.status} ${JSON.stringify(made.body)}`).toMatch(/: 2\d\d /);
      res = await send(t, example);
    }
    expect(`${example.label}: ${res.status} ${JSON.stringify(res.body)}`).toMatch(/: 2\d\d /);
  });
});

const fiveYearsMs = 5 * 365.25 * 86_400_000;

/** The ISO 8601 dates in every example of a document (request and response, schema and parameter) less than five years after `now`. */
function soonIn(doc: unknown, now: Date): string[] {
  const out: string[] = [];
  const dates = (value: unknown, where: string): void => {
    if (typeof value === 'string') {
      for (const [date] of value.matchAll(/\b\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2})?)?/g)) {
        const ms = Date.parse(date) - now.getTime();
        if (ms > 0 && ms < fiveYearsMs) out.push(`${where}: ${date}`);
      }
    } else if (value && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) dates(v, `${where}/${k}`);
    }
  };
  const walk = (node: unknown, where: string): void => {
    if (!node || typeof node !== 'object') return;
    for (const [k, v] of Object.entries(node)) {
      if (k === 'example' || k === 'examples') dates(v, `${where}/${k}`);
      else walk(v, `${where}/${k}`);
    }
  };
  walk(doc, '');
  return out;
}

describe('dates in the examples of openapi.yaml', () => {
  it('are none of them less than five years ahead (2099 is far enough)', () => {
    expect(soonIn(raw, new Date())).toEqual([]);
  });

  it('would be found five years before they pass, in any example', () => {
    expect(soonIn(raw, new Date('2094-06-01T00:00:00Z'))).toEqual(
      expect.arrayContaining(['/paths//api-keys/post/requestBody/content/application/json/example/expiresAt: 2099-01-01T00:00:00Z']),
    );
    const soon = new Date(Date.now() + 365 * 86_400_000).toISOString();
    expect(soonIn({ components: { schemas: { Order: { example: { shipDate: soon } } } } }, new Date())).toEqual([
      `/components/schemas/Order/example/shipDate: ${soon}`,
    ]);
  });
});
