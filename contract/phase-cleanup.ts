// The run's closing phases: delete what the run made (and check it is gone), probe
// undeclared methods and unknown paths, and reach 429 on the rate-limited instance.
import { templateMatches } from './checks';
import type { HttpClient } from './http';
import { methods } from './spec';
import { invalidTraffic } from './phase-invalid';
import { exerciseOther } from './phase-valid';
import { isSuccess, undeclared, unknownPath, type Resource, type Run } from './runner';

export async function deletePhase(run: Run): Promise<void> {
  const deletes = run.contract.operations.filter((op) => op.method === 'delete');
  for (const op of deletes) {
    if (!run.authFor(op)) run.skipped.set(op.id, op.role ? `needs a key with the ${op.role} role (--admin-key)` : 'no credentials');
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
