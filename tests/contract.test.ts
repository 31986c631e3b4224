// The contract suite's own pieces (contract/): generation is reproducible and valid,
// broken inputs are really broken, and a service that strays from openapi.yaml is caught.
import { createServer, request as forward, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { handlers } from '../handlers';
import { check, ResponseValidator } from '../contract/checks';
import { arbitrary, brokenBodies, flatten, Source, typeOf } from '../contract/generate';
import { HttpClient } from '../contract/http';
import { formatFailure, formatReport, maskAuthorization } from '../contract/report';
import { runSuite } from '../contract/runner';
import { Run } from '../contract/run-state';
import { buildContract, documented, loadContract, type Operation } from '../contract/spec';
import { loadSpec } from '../server/spec';
import { admin, customer, setupApp, type TestApp } from './helpers';

const contract = loadContract();
const validator = new ResponseValidator(contract);
const newPet = { $ref: '#/components/schemas/NewPet' };
const newAccount = { $ref: '#/components/schemas/NewAccount' };
/** An email's local part, its labels and its whole, by length. */
const emailSizes = (email: string) => {
  const [local = '', domain = ''] = email.split('@');
  return { local: local.length, labels: domain.split('.').map((l) => l.length), total: email.length };
};

async function listen(t: TestApp): Promise<{ server: Server; client: HttpClient }> {
  const server = t.app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as AddressInfo;
  return { server, client: new HttpClient(`http://127.0.0.1:${port}`) };
}

/** A whole run of the suite against an in-process app, with a customer's and an admin's key. */
async function runAgainst(t: TestApp, client: HttpClient, { seed, runs }: { seed: number; runs: number }) {
  return runSuite({
    client,
    contract,
    validator,
    seed,
    runs,
    customerKey: (await customer(t.app)).key,
    adminKey: (await admin(t)).key,
    bodyLimitBytes: 65536,
    rateLimitReason: 'not probed in this test',
  });
}

/**
 * A proxy in front of `server` that answers a request itself when `fault` says how (a lax
 * or fragile service in front of a correct one), and forwards the rest unchanged.
 */
async function faultyProxy(
  server: Server,
  fault: (req: { method: string; url: string; authorization: string; body: string }) => { status: number; body: string } | undefined,
): Promise<{ proxy: Server; client: HttpClient }> {
  const { port } = server.address() as AddressInfo;
  const proxy = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const faked = fault({ method: req.method ?? '', url: req.url ?? '', authorization: req.headers.authorization ?? '', body });
      if (faked) {
        res.writeHead(faked.status, { 'Content-Type': 'application/json' }).end(faked.body);
        return;
      }
      const out = forward({ host: '127.0.0.1', port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      out.end(chunks.length > 0 ? Buffer.concat(chunks) : undefined);
    });
  });
  proxy.listen(0, '127.0.0.1');
  await new Promise((resolve) => proxy.once('listening', resolve));
  return { proxy, client: new HttpClient(`http://127.0.0.1:${(proxy.address() as AddressInfo).port}`) };
}

describe('contract suite: generation', () => {
  const draw = (seed: number) => {
    const source = new Source(seed);
    return Array.from({ length: 20 }, () => source.draw(arbitrary(newPet, contract.deref)));
  };

  it('draws the same values for the same seed and others for another seed', () => {
    expect(draw(7)).toEqual(draw(7));
    expect(draw(8)).not.toEqual(draw(7));
  });

  it('draws only values the schema accepts', () => {
    for (const body of [...draw(1), ...draw(2)]) {
      expect(validator.validate('#/components/schemas/NewPet', body)).toEqual([]);
    }
  });

  it("draws a sign-up's email at every bound of RFC 5321 at once, which the schema allows", () => {
    for (const seed of [1, 2]) {
      const body = new Source(seed).draw(arbitrary(newAccount, contract.deref)) as { email: string };
      expect(emailSizes(body.email)).toEqual({ local: 64, labels: [63, 63, 61], total: 254 });
      expect(validator.validate('#/components/schemas/NewAccount', body)).toEqual([]);
    }
  });

  it("breaks an email one past each of RFC 5321's bounds, and `format: email` alone refuses each", () => {
    const valid = { email: 'a@example.com', password: 'correct horse' };
    const broken = brokenBodies(newAccount, valid, contract.deref, 65536).filter((b) => b.label.includes('RFC 5321'));
    expect(broken.map((b) => b.label)).toEqual([
      'field "email" with a local part of 65 characters (RFC 5321: at most 64)',
      'field "email" with a domain label of 64 characters (RFC 5321: at most 63)',
      'field "email" of 255 characters, each part within its bound (RFC 5321: at most 254)',
    ]);
    const sizes = broken.map((b) => emailSizes((JSON.parse(b.text) as { email: string }).email));
    expect(sizes.map((s) => [s.local, Math.max(...s.labels), s.total])).toEqual([
      [65, 10, 80],
      [10, 64, 79],
      [64, 63, 255],
    ]);
    for (const { text } of broken) {
      const { email } = JSON.parse(text) as { email: string };
      expect(validator.validate('#/components/schemas/NewAccount', { ...valid, email })).not.toEqual([]);
      // Account.email has no pattern: the suite's `email` format is what refuses it in a 201.
      const account = { id: 1, email, role: 'customer', createdAt: '2026-11-21T10:00:00.000Z' };
      expect(validator.validate('#/components/schemas/Account', account)).toEqual(['/email must match format "email"']);
    }
  });

  it('breaks a body only in ways the schema refuses', () => {
    const valid = { name: 'Rex', categoryId: 1 };
    const broken = brokenBodies(newPet, valid, contract.deref, 65536);
    expect(broken.map((b) => b.label)).toEqual(
      expect.arrayContaining(['without required field "name"', 'with an unknown property', 'field "categoryId" an integer past 2^53-1']),
    );
    for (const { label, text } of broken) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        continue; // malformed JSON is refused before any schema
      }
      expect({ label, accepted: validator.validate('#/components/schemas/NewPet', parsed).length === 0 }).toEqual({
        label,
        accepted: false,
      });
    }
  });
});

describe('contract suite: checks', () => {
  it('catches a status the spec does not document', async () => {
    const doc = structuredClone(contract.doc);
    delete (doc.paths['/api-keys'] as { get: { responses: Record<string, unknown> } }).get.responses['401'];
    const trimmed = buildContract(doc);
    const { server, client } = await listen(setupApp());
    try {
      const request = { method: 'GET', path: '/api-keys', headers: {} };
      const response = await client.send(request);
      const op = trimmed.find('get', '/api-keys')!;
      const failures = check(
        { opId: op.id, op, label: 'no key', expect: { kind: 'valid' }, request, response },
        trimmed,
        new ResponseValidator(trimmed),
      );
      expect(failures).toEqual([expect.stringContaining('status 401 is not documented for listApiKeys')]);
      // The same answer passes against the real contract.
      const real = contract.find('get', '/api-keys')!;
      expect(
        check({ opId: real.id, op: real, label: 'no key', expect: { kind: 'valid' }, request, response }, contract, validator),
      ).toEqual([]);
    } finally {
      client.close();
      server.close();
    }
  });

  it('catches a header the spec declares required and the answer does not carry', async () => {
    const { server, client } = await listen(setupApp());
    try {
      const request = { method: 'GET', path: '/api-keys', headers: {} };
      const response = await client.send(request);
      const op = contract.find('get', '/api-keys')!;
      expect(documented(op, 401)?.requiredHeaders).toEqual(['X-Request-Id', 'X-Content-Type-Options']);
      const exchange = { opId: op.id, op, label: 'no key', expect: { kind: 'valid' as const }, request, response };
      expect(check(exchange, contract, validator)).toEqual([]);
      const { 'x-content-type-options': _dropped, ...rest } = response.headers;
      expect(check({ ...exchange, response: { ...response, headers: rest } }, contract, validator)).toEqual([
        'no X-Content-Type-Options header on 401, though the spec declares it required',
      ]);
    } finally {
      client.close();
      server.close();
    }
  });

  it('masks keys to their last four characters', () => {
    expect(maskAuthorization('Bearer ps_live_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH')).toBe('Bearer …EFGH');
    expect(maskAuthorization(`Basic ${Buffer.from('a@example.com:secret password').toString('base64')}`)).toMatch(/^Basic …\S{4}$/);
    expect(maskAuthorization('Bearer')).toBe('Bearer');
  });
});

describe('contract suite: forms shared out among the operations', () => {
  const runOf = (seed: number) =>
    new Run({
      client: new HttpClient('http://127.0.0.1:9'),
      contract,
      validator,
      seed,
      runs: 1,
      bodyLimitBytes: 65536,
      rateLimitReason: '',
    });
  const takesBody = (o: Operation) => o.body !== undefined;

  it('sends each form to one operation a run, and to every operation over as many seeds', () => {
    const forms = ['malformed JSON', 'the JSON literal null', 'a JSON array'];
    const ops = contract.operations.filter(takesBody);
    const sent = new Set<string>();
    for (let seed = 4000; seed < 4000 + ops.length; seed++) {
      const run = runOf(seed);
      const given = ops.map((op) => run.shareOut(op, forms, takesBody));
      expect(given.flat().sort()).toEqual([...forms].sort());
      ops.forEach((op, i) => given[i]!.forEach((form) => sent.add(`${op.id}: ${form}`)));
    }
    expect(sent.size).toBe(ops.length * forms.length);
  });

  it('gives an operation outside the population none, the first form to every one with keepFirst, all with everyOperation', () => {
    const run = runOf(7);
    const noBody = contract.operations.find((o) => !takesBody(o))!;
    expect(run.shareOut(noBody, ['malformed JSON'], takesBody)).toEqual([]);
    const whole = new Run({ ...run.o, everyOperation: true });
    expect(whole.shareOut(noBody, ['malformed JSON'], takesBody)).toEqual([]);
    for (const op of contract.operations.filter(takesBody)) expect(whole.shareOut(op, ['a', 'b'], takesBody)).toEqual(['a', 'b']);
    for (const op of contract.operations.filter(takesBody)) {
      expect(run.shareOut(op, ['no Authorization header', 'Token', 'Basic'], takesBody, { keepFirst: true })[0]).toBe(
        'no Authorization header',
      );
    }
  });
});

describe('contract suite: a whole run', () => {
  /** The label of a request that failed and that fast-check shrank. */
  const shrunk = (label: string) =>
    expect.stringMatching(
      new RegExp(`^${label}, shrunk by fast-check to the smallest failing request \\(\\d+ steps; fast-check seed \\d+, path [\\d:]+\\)$`),
    );

  it('shrinks a failing valid request to the smallest one that still fails', async () => {
    // A list that breaks its documented shape only when asked for pages of 3 or more.
    const asked = (url: string) => Number(/[?&]limit=(\d+)/.exec(url)?.[1] ?? 0);
    const t = setupApp({
      env: { VALIDATE_RESPONSES: 'false' },
      handlers: {
        listCategories: ({ url }) => ({ status: 200, body: asked(url) >= 3 ? ([{ id: 1, name: 'Dogs', colour: 'brown' }] as never) : [] }),
      },
    });
    const { server, client } = await listen(t);
    try {
      const result = await runAgainst(t, client, { seed: 3, runs: 10 });
      // The property's valid requests (the "bearer" probe draws its own, unshrunk).
      const failing = result.exchanges.filter((e) => e.opId === 'listCategories' && e.label.startsWith('valid') && e.failures.length > 0);
      expect(failing.map((e) => ({ label: e.label, path: e.request.path }))).toEqual([
        { label: shrunk('valid'), path: '/categories?limit=3' },
      ]);
      expect(failing[0]!.failures.join('\n')).toContain('must NOT have additional properties "colour"');
    } finally {
      client.close();
      server.close();
    }
  }, 120_000);

  it('shrinks a failing create to the shortest name that still fails', async () => {
    // Creating a category fails (a 500) for names of five characters or more.
    const t = setupApp({
      handlers: {
        createCategory: (input, ctx) => {
          if ([...input.body.name].length >= 5) throw new Error('a fault for long names');
          return handlers.createCategory(input, ctx);
        },
      },
    });
    const { server, client } = await listen(t);
    try {
      const result = await runAgainst(t, client, { seed: 3, runs: 3 });
      const failing = result.exchanges.filter((e) => e.opId === 'createCategory' && e.failures.length > 0);
      expect(failing.map((e) => e.label)).toEqual([shrunk('valid')]);
      // Five characters, the optional description left out.
      const body = JSON.parse(failing[0]!.request.body!) as Record<string, string>;
      expect(Object.keys(body)).toEqual(['name']);
      expect([...body.name!]).toHaveLength(5);
      expect(failing[0]!.failures.join('\n')).toContain('500');
      const printed = formatFailure(failing[0]!, 'Reproduce with: npm run test:contract -- --seed 3');
      expect(printed).toContain(`request:  POST /categories`);
      expect(printed).toContain(JSON.stringify(body));
      // The short names that passed made categories, and the run chained on them.
      expect(result.exchanges.filter((e) => e.opId === 'createPet' && e.response.status === 201).length).toBeGreaterThan(0);
    } finally {
      client.close();
      server.close();
    }
  }, 120_000);

  it('shrinks a failing invalid request to the smallest one that still fails', async () => {
    // A proxy in front of the service that accepts an unknown property in a new
    // category (200) when its name has five characters or more, as a lax validator might.
    const t = setupApp();
    const app = await listen(t);
    const { proxy, client } = await faultyProxy(app.server, ({ method, url, body: text }) => {
      let body: { name?: unknown; unexpectedProperty?: unknown } | undefined;
      try {
        body = JSON.parse(text) as typeof body;
      } catch {
        body = undefined;
      }
      const lax =
        method === 'POST' &&
        url === '/categories' &&
        body?.unexpectedProperty !== undefined &&
        typeof body.name === 'string' &&
        [...body.name].length >= 5;
      return lax ? { status: 200, body: '{}' } : undefined;
    });
    try {
      const result = await runAgainst(t, client, { seed: 5, runs: 1 });
      const failing = result.exchanges.filter((e) => e.opId === 'createCategory' && e.failures.length > 0);
      expect(failing.map((e) => e.label)).toEqual([shrunk('a body with an unknown property')]);
      expect(failing[0]!.failures).toContain('invalid input (a body with an unknown property) was accepted with 200');
      const body = JSON.parse(failing[0]!.request.body!) as Record<string, string>;
      expect(Object.keys(body)).toEqual(['name', 'unexpectedProperty']);
      expect([...body.name!]).toHaveLength(5);
    } finally {
      client.close();
      proxy.close();
      app.client.close();
      app.server.close();
    }
  }, 120_000);

  it('catches, whatever the seed, a fault in each step whose forms are shared out among the operations', async () => {
    // A service whose shared steps are broken for every operation: it takes an unknown query
    // parameter, fails on U+0000 or a lone surrogate in a body's string, on JSON nested too
    // deep, on malformed JSON, on an escape no URL decoder may choke on, takes a key under
    // another scheme, and refuses the scheme written in lower case. Each form goes to one
    // operation a run, so each fault is caught in every run, whichever operation it went to.
    const t = setupApp();
    const app = await listen(t);
    // The parameters that hold no text (numbers, booleans, lists of them), by name: the
    // escapes in them are the shared ones (those in text parameters go to every operation).
    const noText = (where: string) => {
      const params = contract.operations.flatMap((o) => o.params).filter((p) => p.in === where);
      const holdsNoText = (schema: unknown) => {
        const s = flatten(schema, contract.deref);
        const type = typeOf(s) === 'array' ? typeOf(flatten(s.items ?? {}, contract.deref)) : typeOf(s);
        return type === 'integer' || type === 'number' || type === 'boolean';
      };
      return [...new Set(params.filter((p) => holdsNoText(p.schema)).map((p) => p.name))].join('|');
    };
    const faults: Array<[RegExp, (req: { url: string; authorization: string; body: string }) => boolean, number]> = [
      [/^an unknown query parameter$/, ({ url }) => url.includes('unexpectedParameter='), 200],
      [/^body field "\w+" holding U\+0000/, ({ body }) => body.includes('\\u0000'), 500],
      [/^body field "\w+" holding a lone surrogate/, ({ body }) => body.includes('\\ud800'), 500],
      [/^a body (field "\w+" )?(JSON )?nested 40 levels deep$/, ({ body }) => body.includes('['.repeat(40)), 500],
      [/^a body malformed JSON$/, ({ body }) => body === '{"unterminated": ', 500],
      [new RegExp(`^path parameter "(${noText('path')})" holding the byte 0xFF`), ({ url }) => /^[^?]*%FF/.test(url), 500],
      [new RegExp(`^query parameter "(${noText('query')})" holding an encoded surrogate`), ({ url }) => /\?.*%ED%A0%80/.test(url), 500],
      [/^the key under another scheme \(Token\)$/, ({ authorization }) => authorization.startsWith('Token '), 200],
      [/^the scheme written "bearer"$/, ({ authorization }) => authorization.startsWith('bearer '), 401],
    ];
    const body = (status: number) => (status === 200 ? '{}' : JSON.stringify({ code: 'broken', message: 'broken', status }));
    const { proxy, client } = await faultyProxy(app.server, (req) => {
      const fault = faults.find(([, matches]) => matches(req));
      return fault && { status: fault[2], body: body(fault[2]) };
    });
    try {
      for (const seed of [11, 12]) {
        const result = await runAgainst(t, client, { seed, runs: 1 });
        const failed = result.exchanges.filter((e) => e.failures.length > 0).map((e) => e.label.split(', shrunk')[0]!);
        const caught = faults.map(([label]) => [String(label), failed.some((l) => label.test(l))]);
        expect(caught).toEqual(faults.map(([label]) => [String(label), true]));
      }
    } finally {
      client.close();
      proxy.close();
      app.client.close();
      app.server.close();
    }
  }, 240_000);

  it("fails a service that takes an email past RFC 5321's bounds, and passes its sign-up at them", async () => {
    // The service with the email pattern it had before the bounds: a 65-character local
    // part and a 64-character label are 201; 255 characters in all are still refused (maxLength).
    type Spec = ReturnType<typeof loadSpec> & { components: { schemas: { NewAccount: { properties: { email: { pattern: string } } } } } };
    const lax = loadSpec() as Spec;
    const email = lax.components.schemas.NewAccount.properties.email;
    const bounded = new RegExp(email.pattern, 'u');
    email.pattern = email.pattern.replace('(?=[^@]{1,64}@)', '').replaceAll('{0,61}', '*');
    const t = setupApp({
      spec: lax,
      handlers: {
        // Such a sign-up is answered without its password hash: the suite shrinks the
        // failing request, a sign-up a step, and 60 hashes would take most of a minute.
        createAccount: (input, ctx) =>
          bounded.test(input.body.email)
            ? handlers.createAccount(input, ctx)
            : { status: 201, body: { id: 1, email: input.body.email, role: 'customer', createdAt: new Date().toISOString() } },
      },
    });
    const { server, client } = await listen(t);
    try {
      const result = await runAgainst(t, client, { seed: 3, runs: 1 });
      const signUp = result.exchanges.find((e) => e.label === "sign-up of the suite's own account")!;
      expect(signUp.response.status).toBe(201);
      expect(emailSizes((signUp.response.json as { email: string }).email).total).toBe(254);
      const failing = result.exchanges.filter((e) => e.opId === 'createAccount' && e.failures.length > 0);
      expect(failing.map((e) => e.label)).toEqual([
        shrunk('a body field "email" with a local part of 65 characters \\(RFC 5321: at most 64\\)'),
        shrunk('a body field "email" with a domain label of 64 characters \\(RFC 5321: at most 63\\)'),
      ]);
      for (const e of failing) {
        expect(e.failures).toEqual([
          expect.stringMatching(/^the body does not match the documented schema \(.+\): \/email must match format "email"$/),
          `invalid input (${e.label.split(', shrunk')[0]}) was accepted with 201`,
        ]);
      }
      expect(formatReport(result, '').split('\n').pop()).toMatch(/^\d+ passed, [1-9]\d* failed$/);
    } finally {
      client.close();
      server.close();
    }
  }, 120_000);

  it('reports a handler whose response breaks the documented shape, with the request and the seed', async () => {
    // The server's own response validation is off, as on a deployment that skips it.
    const t = setupApp({
      env: { VALIDATE_RESPONSES: 'false' },
      handlers: { getHealth: () => ({ status: 200, body: { status: 'ok', uptimeSeconds: 12 } as never }) },
    });
    const { server, client } = await listen(t);
    try {
      const result = await runAgainst(t, client, { seed: 42, runs: 1 });
      const broken = result.exchanges.filter((e) => e.opId === 'getHealth' && e.failures.length > 0);
      expect(broken.length).toBeGreaterThan(0);
      expect(broken[0]!.failures.join('\n')).toMatch(
        /does not match the documented schema.*must NOT have additional properties "uptimeSeconds"/,
      );
      const printed = formatFailure(broken[0]!, 'Reproduce with: npm run test:contract -- --seed 42');
      expect(printed).toContain('request:  GET /healthz');
      expect(printed).toContain('Reproduce with: npm run test:contract -- --seed 42');
      expect(formatReport(result, '').split('\n').pop()).toMatch(/^\d+ passed, [1-9]\d* failed$/);
      // Every other operation the committed service implements is not blamed for getHealth's fault.
      expect(result.exchanges.filter((e) => e.opId === 'getReadiness' && e.failures.length > 0)).toEqual([]);
    } finally {
      client.close();
      server.close();
    }
  }, 120_000);
});
