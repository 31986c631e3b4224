// The run's first phase, per operation in dependency order: valid traffic (creates that
// later operations chain on, item reads and updates, lists), the drawn requests as
// shrinking fast-check properties (property.ts), then that operation's invalid traffic
// (phase-invalid.ts).
import type { Exchange } from './checks';
import { arbitrary, flatten, typeOf } from './generate';
import type { SentRequest } from './http';
import type { Operation, Param } from './spec';
import { invalidTraffic } from './phase-invalid';
import { requestProperty } from './property';
import { isSuccess, type Resource, type Run } from './run-state';

export async function exercise(run: Run, op: Operation): Promise<void> {
  const auth = run.authFor(op);
  if (!auth) {
    run.skipped.set(
      op.id,
      op.role ? `needs a key with the ${op.role} role (PETSTORE_ADMIN_KEY or --admin-key-file)` : 'no credentials for its security scheme',
    );
  } else if (run.producerMade(op)) {
    await exerciseCreate(run, op);
  } else if (run.itemParam(op)) {
    await exerciseItem(run, op);
  } else {
    await exerciseOther(run, op, auth);
  }
  await invalidTraffic(run, op);
}

async function exerciseCreate(run: Run, op: Operation): Promise<void> {
  const usesIds = run.consumes(op).length > 0;
  const auth = run.authFor(op)!;
  let made = 0;
  let first: SentRequest | undefined;
  const noteMade = (ex: Exchange, body: unknown) => {
    if (!isSuccess(ex.response.status)) return;
    made++;
    record(run, op, ex, body, auth);
  };
  // At least two of each, whatever --runs says: one to change, one left as it was made.
  // Ids come from any live parent; a business rule may refuse one (no stock, not
  // available), a documented 409/422 that passes the checks.
  await requestProperty(run, op, run.inputs(op), {
    label: 'valid',
    expect: { kind: 'valid' },
    numRuns: Math.max(run.o.runs, 2),
    request: (inputs) => run.build(op, inputs, auth),
    onAnswer: (ex, inputs) => noteMade(ex, inputs.body),
    onPass: (_ex, request) => {
      first ??= request;
    },
  });
  // Later steps need two of each (one to complete, one left open). When business rules
  // refused the generated requests, set the parents up afresh with their own update
  // operations and ask for the least: required fields only, numbers at their minimum.
  // These are set-up requests picked for the chaining, not drawn, so they are not shrunk.
  // An operation without ids asks too (its draws may all have been refused), and a bound
  // on what one account holds answers these with its documented refusal.
  const wanted = 2;
  for (let round = 0; made < wanted && round < 6; round++) {
    await refreshParents(run, op);
    const parents = Math.max(...run.consumes(op).map((n) => run.live(n, true).length), 1);
    for (let choice = 0; choice < parents && made < wanted; choice++) {
      const inputs = run.generate(op, { choice: choice + round, least: true });
      noteMade(await run.send(op, 'valid, the least the schema allows', { kind: 'valid' }, run.build(op, inputs, auth)), inputs.body);
    }
  }
  if (first) {
    const again = await run.send(op, 'the first valid request again, unchanged', { kind: 'valid' }, first);
    if (isSuccess(again.response.status)) record(run, op, again, first.body === undefined ? undefined : JSON.parse(first.body), auth);
  }
  await headerReplay(run, op);
  await untilQuota(run, op, auth);
  if (usesIds) {
    const inputs = run.generate(op, { dangling: true });
    await run.send(op, 'a body naming ids that do not exist', { kind: 'invalid' }, run.build(op, inputs, auth));
  }
}

/**
 * The key issuer's documented 409 is a bound on the keys one account holds, which the spec
 * states (`info.x-limits.activeKeysPerAccount`): the least request is repeated until it is
 * refused, at most one past that bound. The keys it makes are revoked with the rest.
 */
async function untilQuota(run: Run, op: Operation, auth: Record<string, string>): Promise<void> {
  const bound = run.stated.activeKeysPerAccount;
  if (!run.o.limits || op !== run.accountOperations().issuer || !bound || !op.responses.has('409')) return;
  const owned = () => run.resources.filter((r) => r.producer.op === op && !r.deleted && !r.discovered).length;
  // The suite's own key is one of the account's.
  for (let sent = 0; owned() + 1 <= bound && sent <= bound; sent++) {
    const inputs = run.generate(op, { least: true });
    const ex = await run.send(op, `valid, toward the bound of ${bound} keys per account`, { kind: 'valid' }, run.build(op, inputs, auth));
    if (!isSuccess(ex.response.status)) return;
    record(run, op, ex, inputs.body, auth);
  }
  const inputs = run.generate(op, { least: true });
  await run.send(op, `valid, past the bound of ${bound} keys per account`, { kind: 'status', status: 409 }, run.build(op, inputs, auth));
}

/** Sends fresh valid updates (PUT, PATCH) to the resources an operation's ids name. */
async function refreshParents(run: Run, op: Operation): Promise<void> {
  for (const param of run.consumes(op)) {
    const updates = run.contract.operations.filter((u) => (u.method === 'put' || u.method === 'patch') && run.itemParam(u) === param);
    for (const update of updates) {
      for (const [i, target] of run.live(param, true).entries()) {
        const auth = run.authFor(update, target.owner);
        if (!auth) continue;
        await run.send(
          update,
          `valid, setting up ${param} ${String(target.id)} again for ${op.id}`,
          { kind: 'valid' },
          run.build(update, run.generate(update, { target, choice: i }), auth),
        );
      }
    }
  }
}

/**
 * With every header parameter set (an Idempotency-Key), the same request twice and then
 * the same headers with another body: the answers must stay within the contract.
 */
async function headerReplay(run: Run, op: Operation): Promise<void> {
  const headerParams = op.params.filter((p) => p.in === 'header');
  const auth = run.authFor(op);
  if (headerParams.length === 0 || !auth) return;
  const inputs = run.generate(op);
  inputs.headers = headerParams.map((p) => [p, run.source.draw(arbitrary(p.schema, run.contract.deref, undefined, true))]);
  const request = run.build(op, inputs, auth);
  const ex = await run.send(op, `valid, with header ${headerParams.map((p) => p.name).join(', ')}`, { kind: 'valid' }, request);
  if (isSuccess(ex.response.status)) record(run, op, ex, inputs.body, auth);
  await run.send(op, 'the same request with the same headers again', { kind: 'valid' }, request);
  const other = run.generate(op, { choice: 1 });
  if (JSON.stringify(other.body) !== JSON.stringify(inputs.body)) {
    await run.send(op, 'the same headers with another body', { kind: 'valid' }, run.build(op, { ...other, headers: inputs.headers }, auth));
  }
}

export function record(run: Run, op: Operation, ex: Exchange, body: unknown, auth: Record<string, string>): void {
  const producer = run.producerMade(op);
  const id = (ex.response.json as { id?: unknown } | undefined)?.id;
  if (!producer || id === undefined) return;
  if (run.resources.some((r) => r.param === producer.param && r.id === id)) return;
  const owner = op.security === 'basic' ? run.signedUp : { header: auth.Authorization };
  run.resources.push({ seq: run.seq++, param: producer.param, id, producer, body, owner, discovered: false, deleted: false });
}

async function exerciseItem(run: Run, op: Operation): Promise<void> {
  const param = run.itemParam(op)!;
  const mutating = op.method !== 'get';
  const own = run.live(param, true);
  const targets = (mutating ? own : await run.available(param)).slice(0, Math.max(run.o.runs, 2));
  if (targets.length === 0) run.skipped.set(op.id, `no ${param} to act on: nothing made one in this run`);
  // Updates leave the last resource as it was made, so later steps meet both kinds.
  const acted = mutating && targets.length > 1 ? targets.slice(0, -1) : targets;
  // One property per target (each is read or changed once, as the chaining expects): the
  // target is fixed, the rest of the request (an update's body, query parameters) shrinks.
  for (const [i, target] of acted.entries()) {
    const auth = run.authFor(op, target.owner)!;
    await requestProperty(run, op, run.inputs(op, { target, choice: i }), {
      label: 'valid',
      expect: { kind: 'valid' },
      numRuns: 1,
      request: (inputs) => run.build(op, inputs, auth),
    });
  }
  // Replacing one resource with the body another was made with (a duplicate name).
  const producer = run.contract.producers.get(param)!;
  const sameBody = op.body && producer.op.body && JSON.stringify(op.body.schema) === JSON.stringify(producer.op.body.schema);
  const last = targets[targets.length - 1];
  if (op.method === 'put' && sameBody && targets.length > 1 && last?.body !== undefined) {
    const inputs = { ...run.generate(op, { target: targets[0] }), body: last.body };
    await run.send(
      op,
      `the body ${param} ${String(last.id)} was made with`,
      { kind: 'valid' },
      run.build(op, inputs, run.authFor(op, targets[0]!.owner)!),
    );
  }
  const schema = op.params.find((p) => p.name === param)!.schema;
  const ghost: Resource = { seq: -1, param, id: run.dangling(schema), producer, owner: run.customer, discovered: true, deleted: false };
  await run.send(
    op,
    `a ${param} that does not exist`,
    { kind: 'invalid' },
    run.build(op, run.generate(op, { target: ghost }), run.authFor(op)!),
  );
  if (op.body && run.consumes(op).some((n) => n !== param) && targets[0]) {
    const inputs = run.generate(op, { target: targets[0], dangling: true });
    inputs.pathParams[param] = targets[0].id;
    await run.send(
      op,
      'a body naming ids that do not exist',
      { kind: 'invalid' },
      run.build(op, inputs, run.authFor(op, targets[0].owner)!),
    );
  }
}

export async function exerciseOther(run: Run, op: Operation, auth: Record<string, string>): Promise<void> {
  // A write under a limit of its own whose window outlasts the run (sign-ups an hour per
  // address): the set-up's request made its one success; it is only sent again, unchanged
  // (a conflict, which such limits do not count), so that the run spends one of the limit.
  const scarce = op.method === 'post' ? run.rateLimits.scarce(op.id, run.longestWaitMs) : undefined;
  const setUp = run.firstRequests.get(op.id);
  if (scarce && setUp) {
    run.log(
      `  ${op.id}: one success only, as the "${scarce.name}" limit allows ${scarce.quota} in ${scarce.windowSeconds} s (${scarce.remaining} left)`,
    );
    await run.send(op, 'the set-up request again, unchanged', { kind: 'valid' }, setUp);
    await missingIds(run, op, auth);
    return;
  }
  let followed = false;
  // The first page's Link rel="next" is followed once: the server's own cursor must work.
  const followNext = async (ex: Exchange, request: SentRequest) => {
    const next = /<([^>]+)>\s*;\s*rel="?next"?/.exec(ex.response.headers.link ?? '')?.[1];
    if (!next || followed) return;
    followed = true;
    const url = new URL(next, run.o.client.url('/'));
    const prefix = run.o.client.url('/').pathname.replace(/\/$/, '');
    const path = url.pathname.slice(prefix.length) + url.search;
    await run.send(op, 'the next page from Link rel="next"', { kind: 'valid' }, { ...request, path });
  };

  // The plainest request first: required parameters only must succeed.
  const first = run.build(op, run.generate(op, { requiredOnly: true }), auth);
  await followNext(await run.send(op, 'valid, required parameters only', { kind: 'valid' }, first), first);
  // Integer query parameters at their minimum (a page of one), so a next page exists.
  const least = op.params.filter(
    (p) =>
      p.in === 'query' &&
      typeOf(flatten(p.schema, run.contract.deref)) === 'integer' &&
      typeof flatten(p.schema, run.contract.deref).minimum === 'number',
  );
  if (least.length > 0) {
    const inputs = run.generate(op, { requiredOnly: true });
    inputs.query.push(...least.map((p): [Param, unknown] => [p, flatten(p.schema, run.contract.deref).minimum]));
    const request = run.build(op, inputs, auth);
    await followNext(
      await run.send(op, `valid, ${least.map((p) => p.name).join(', ')} at the minimum`, { kind: 'valid' }, request),
      request,
    );
  }
  await requestProperty(run, op, run.inputs(op), {
    label: 'valid',
    expect: { kind: 'valid' },
    numRuns: run.o.runs,
    request: (inputs) => run.build(op, inputs, auth),
    onPass: followNext,
  });

  // The scheme name is case-insensitive (RFC 9110): `bearer` must work as `Bearer` does. One
  // credential parser reads it for every operation: one such read each run (Run.shareOut).
  const lowerCase = (o: Operation) =>
    o.method === 'get' && o.security === 'bearer' && !run.itemParam(o) && !run.producerMade(o) && run.authFor(o) !== undefined;
  if (lowerCase(op) && auth.Authorization && run.shareOut(op, ['bearer'], lowerCase).length > 0) {
    const lower = { Authorization: auth.Authorization.replace(/^Bearer/, 'bearer') };
    await run.send(op, 'the scheme written "bearer"', { kind: 'not-status', status: 401 }, run.build(op, run.generate(op), lower));
  }
  if (op.method === 'post') await run.send(op, 'the first valid request again, unchanged', { kind: 'valid' }, first);
  await missingIds(run, op, auth);
}

/**
 * An operation below an item path (`/pets/{petId}/photos`): each id of its path in turn
 * names nothing. Documented 404s of sub-resources are exercised this way, with no word
 * about the operation in the suite.
 */
async function missingIds(run: Run, op: Operation, auth: Record<string, string>): Promise<void> {
  for (const p of op.params.filter((p) => p.in === 'path' && run.contract.producers.has(p.name))) {
    const inputs = run.generate(op);
    inputs.pathParams[p.name] = run.dangling(p.schema);
    await run.send(op, `a ${p.name} that does not exist`, { kind: 'invalid' }, run.build(op, inputs, auth));
  }
}
