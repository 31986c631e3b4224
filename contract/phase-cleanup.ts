// The run's closing phases: delete what the run made (and check it is gone), probe
// undeclared methods and unknown paths, reach 429 (on the rate-limited instance, or by
// spending what is left of the address's limit and then waiting for its window to end),
// and check that the runner's address is left as it was found.
import { templateMatches, type Exchange } from './checks';
import { arbitrary } from './generate';
import type { HttpClient } from './http';
import { methods } from './spec';
import { invalidTraffic } from './phase-invalid';
import { exerciseOther, record } from './phase-valid';
import { b64, isSuccess, sleep, undeclared, unknownPath, type Resource, type Run } from './run-state';

export async function deletePhase(run: Run): Promise<void> {
  const deletes = run.contract.operations.filter((op) => op.method === 'delete');
  for (const op of deletes) {
    if (!run.authFor(op))
      run.skipped.set(op.id, op.role ? `needs a key with the ${op.role} role (PETSTORE_ADMIN_KEY or --admin-key-file)` : 'no credentials');
    const param = run.itemParam(op);
    if (!param) {
      if (run.authFor(op)) await exerciseOther(run, op, run.authFor(op)!);
    } else {
      const schema = op.params.find((p) => p.name === param)!.schema;
      const producer = run.contract.producers.get(param)!;
      const ghost: Resource = { seq: -1, param, id: run.dangling(schema), producer, owner: run.customer, discovered: true, deleted: false };
      if (run.authFor(op))
        await run.send(
          op,
          `a ${param} that does not exist`,
          { kind: 'invalid' },
          run.build(op, run.generate(op, { target: ghost }), run.authFor(op)!),
        );
      if (run.live(param, true).length === 0) run.skipped.set(op.id, `no ${param} to delete: nothing made one in this run`);
    }
    await invalidTraffic(run, op);
  }
  const byParam = new Map(deletes.map((op) => [run.itemParam(op), op]));
  const attempt = async (r: Resource) => {
    const op = byParam.get(r.param);
    const auth = op ? run.authFor(op, r.owner) : undefined;
    if (!op || !auth || r.deleted || r.discovered) return;
    const ex = await run.send(op, 'valid', { kind: 'valid' }, run.build(op, run.generate(op, { target: r }), auth));
    if (!isSuccess(ex.response.status)) return;
    r.deleted = true;
    const get = run.contract.find('get', op.path);
    const getAuth = get ? run.authFor(get, r.owner) : undefined;
    if (get && getAuth) {
      await run.send(
        get,
        `the ${r.param} after a successful DELETE`,
        { kind: 'status', status: 404 },
        run.build(get, run.generate(get, { target: r }), getAuth),
      );
    }
    await run.send(op, 'the same DELETE again', { kind: 'valid' }, run.build(op, run.generate(op, { target: r }), auth));
  };
  // First in the order things were made (parents first: their dependants refuse it),
  // then the other way round, once the dependants are gone.
  const own = run.resources.filter((r) => !r.discovered).sort((a, b) => a.seq - b.seq);
  for (const r of own) await attempt(r);
  for (const r of [...own].reverse()) await attempt(r);
}

export async function routingPhase(run: Run): Promise<void> {
  const auth: Record<string, string> = run.customer.header ? { Authorization: run.customer.header } : {};
  for (const path of run.contract.paths) {
    const declared = methods.filter((m) => run.contract.find(m, path));
    const sample = run.contract.find(declared[0]!, path)!;
    const inputs = run.generate(sample);
    for (const [name] of Object.entries(inputs.pathParams)) {
      const live = run.live(name);
      if (live[0]) inputs.pathParams[name] = live[0].id;
    }
    const concrete = run.build(sample, { ...inputs, query: [], headers: [] }, auth).path;
    const allowed = declared.map((m) => m.toUpperCase());
    for (const method of methods.filter((m) => !declared.includes(m))) {
      await run.send(
        undefined,
        `${method.toUpperCase()} on ${path}, which declares ${allowed.join(', ')}`,
        { kind: 'status', status: 405 },
        { method: method.toUpperCase(), path: concrete, headers: { Accept: 'application/json', ...auth } },
        { opId: undeclared, allowed },
      );
    }
    // Deep enough below the path that no template of the spec matches it.
    let unknown = concrete.replace(/\/$/, '');
    do unknown += '/no-such-path';
    while (run.contract.paths.some((t) => templateMatches(t, unknown)));
    await run.send(
      undefined,
      `a path under ${path} that the spec does not have`,
      { kind: 'status', status: 404 },
      { method: 'GET', path: unknown, headers: { Accept: 'application/json', ...auth } },
      { opId: unknownPath },
    );
  }
  await run.send(
    undefined,
    'a path the spec does not have',
    { kind: 'status', status: 404 },
    { method: 'GET', path: '/no-such-path-in-the-spec', headers: { Accept: 'application/json', ...auth } },
    { opId: unknownPath },
  );
}

/** On an instance that allows one request a minute, the second request of a caller is 429. */
export async function rateLimitPhase(run: Run, client: HttpClient): Promise<void> {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  for (const op of run.contract.operations.filter((o) => o.responses.has('429'))) {
    const secret = Array.from({ length: 40 }, () => alphabet[run.source.int(alphabet.length)]).join('');
    const auth: Record<string, string> = op.security === 'bearer' ? { Authorization: `Bearer ps_live_${secret}` } : {};
    const inputs = run.generate(op);
    const request = run.build(op, inputs, auth);
    await run.send(op, 'the first request of a caller on the rate-limited instance', { kind: 'valid' }, request, {}, client);
    await run.send(op, 'the second request of that caller within the minute', { kind: 'status', status: 429 }, request, {}, client);
  }
}

/**
 * Against a service whose limit the run can reach (its default configuration): spends what
 * is left of the limit every request counts against (the client address), with requests
 * that carry no key, so that no account's limit is touched; sends each operation that
 * documents 429 once past it; then waits as Retry-After says, and the runner is served
 * again. Skipped, with the reason kept for the coverage table, when the limit is too
 * large to spend or its window too long to wait for.
 */
export async function spendRateLimitPhase(run: Run): Promise<void> {
  const documenting = run.contract.operations.filter((o) => o.responses.has('429'));
  const shared = run.rateLimits.shared();
  const spender = run.contract.operations.find((o) => o.security === 'bearer' && o.method === 'get' && o.responses.has('401'));
  if (documenting.length === 0) return;
  if (!shared || !spender) {
    run.rateLimitNote = 'no answer named a limit every request counts against (RateLimit-Policy)';
    return;
  }
  const maxSpend = 2000;
  if (shared.remaining > maxSpend || shared.windowSeconds * 1000 > run.longestWaitMs) {
    run.rateLimitNote = `the "${shared.name}" limit (${shared.quota} a ${shared.windowSeconds} s window) is more than a run spends (${maxSpend} requests, a window of ${run.longestWaitMs / 1000} s)`;
    return;
  }
  run.log(
    `Spending the "${shared.name}" limit (${shared.remaining} of ${shared.quota} left) to see each operation's 429, then waiting for its window to end`,
  );
  const request = run.build(spender, run.generate(spender, { requiredOnly: true }), {});
  let last: Exchange | undefined;
  // A window that ends while the run spends starts a new one: at most a quota more.
  for (let i = 0; i <= shared.remaining + shared.quota + 10; i++) {
    // Only the answers that fail a check, and the first 429, are kept: the rest are alike.
    const ex = await run.exchange(
      spender,
      `no key, spending the "${shared.name}" limit`,
      { kind: 'invalid' },
      request,
      { spending: true },
      run.o.client,
    );
    if (ex.failures.length > 0 || ex.response.status === 429) run.keep(ex);
    last = ex;
    if (ex.response.status === 429 || ex.response.status === 0) break;
  }
  if (last?.response.status !== 429) {
    run.rateLimitNote = `spending the "${shared.name}" limit did not reach a 429`;
    return;
  }
  let retryAfter = Number(last.response.headers['retry-after']) || shared.windowSeconds;
  for (const op of documenting) {
    const auth = run.authFor(op) ?? {};
    const ex = await run.send(
      op,
      `past the "${shared.name}" limit`,
      { kind: 'status', status: 429 },
      run.build(op, run.generate(op), auth),
      {
        spending: true,
      },
    );
    retryAfter = Math.max(retryAfter, Number(ex.response.headers['retry-after']) || 0);
  }
  run.spentRateLimit = true;
  const ms = Math.min(retryAfter, shared.windowSeconds) * 1000 + 500;
  run.log(`  waiting ${(ms / 1000).toFixed(1)} s, as Retry-After says, for the window to end`);
  run.waitedForRateLimitMs += ms;
  await sleep(ms);
  run.rateLimits.renewed(shared);
  await run.send(spender, `no key, once the "${shared.name}" window has ended`, { kind: 'not-status', status: 429 }, request, {
    spending: true,
  });
}

/**
 * The runner's address as the run found it: not locked out of password logins (the
 * suite's own account logs in through the key issuer, and the key it gets is revoked).
 */
export async function leftAsFound(run: Run): Promise<void> {
  const { issuer } = run.accountOperations();
  if (!issuer || !run.basic) return;
  const headers = { Authorization: `Basic ${b64(`${run.basic.email}:${run.basic.password}`)}` };
  const body = issuer.body?.required ? run.source.draw(arbitrary(issuer.body.schema, run.contract.deref)) : undefined;
  const ex = await run.send(
    issuer,
    "a password login of the suite's own account at the end: the runner's address is not locked out",
    { kind: 'not-status', status: 429 },
    run.build(issuer, { pathParams: {}, query: [], headers: [], body }, headers),
  );
  if (!isSuccess(ex.response.status)) return;
  record(run, issuer, ex, body, headers);
  const made = run.resources[run.resources.length - 1];
  const revoke = made ? run.contract.operations.find((o) => o.method === 'delete' && run.itemParam(o) === made.param) : undefined;
  const auth = revoke && made ? run.authFor(revoke, made.owner) : undefined;
  if (!revoke || !made || !auth) return;
  const gone = await run.send(
    revoke,
    'revoking the key that login made',
    { kind: 'valid' },
    run.build(revoke, run.generate(revoke, { target: made }), auth),
  );
  if (isSuccess(gone.response.status)) made.deleted = true;
}
