// A run's state and what the phases share (phase-valid.ts, phase-invalid.ts,
// phase-cleanup.ts): the callers and their keys, the order of operations and the ids they
// chain, the inputs drawn from the schemas, and sending, checking and pacing each request.
// runner.ts runs the phases on it.
import type { ValidateFunction } from 'ajv';
import fc from 'fast-check';
import { check, type Exchange, type Expectation } from './checks';
import type { ResponseValidator } from './checks';
import { arbitrary, flatten, leastOf, Source, typeOf, type Override } from './generate';
import type { HttpClient, ReceivedResponse, SentRequest } from './http';
import { createAjv } from './schema';
import { failedLoginBudget, RateLimits, statedLimits, type StatedLimits } from './limits';
import { successStatuses, type Contract, type Operation, type Param, type Producer, type Schema } from './spec';

export interface Credentials {
  email: string;
  password: string;
}

export interface RunOptions {
  client: HttpClient;
  contract: Contract;
  validator: ResponseValidator;
  seed: number;
  /** Resources made per create operation, and samples per read. */
  runs: number;
  /** A customer's key; without it the suite uses the key of the account it signs up. */
  customerKey?: string;
  /** A key of the role that `x-required-role` operations need. */
  adminKey?: string;
  /** Credentials of an account with that role, to get such a key through the API. */
  adminCredentials?: Credentials;
  /** Request bodies above this many bytes must be refused (the spec says 64 KiB). */
  bodyLimitBytes: number;
  /** Why 429 may not be seen in this run. */
  rateLimitReason: string;
  /** A second instance of the service with a tiny rate limit, where 429 is reachable. */
  rateLimitedClient?: HttpClient;
  /** Called with each finished exchange (progress, streaming failures). */
  onExchange?: (exchange: Exchange) => void;
  log?: (line: string) => void;
  /** The longest the run waits for one limit's window to end (default 90 s). */
  longestWaitMs?: number;
  /**
   * Reach the limits' own answers where that takes spending them: the request limit every
   * request counts against (its 429, then its window waited out) and the keys one account
   * may hold (the key issuer's 409, a password check per key). Off, a run stays well
   * inside every limit and waits out no window to see a refusal (`--limits` turns it on).
   */
  limits?: boolean;
  /**
   * Send what one step answers for every operation to every operation, rather than share it
   * out (Run.shareOut): the whole matrix, for a service whose request limit does not bind
   * (`--every-operation`; `npm run test:contract`'s own server).
   */
  everyOperation?: boolean;
}

export interface Auth {
  header?: string;
  role?: string;
}

export interface Resource {
  seq: number;
  param: string;
  id: unknown;
  producer: Producer;
  body?: unknown;
  owner: Auth;
  /** Found through a list operation: not the run's to change or delete. */
  discovered: boolean;
  deleted: boolean;
}

export interface Inputs {
  pathParams: Record<string, unknown>;
  query: Array<[Param, unknown]>;
  headers: Array<[Param, unknown]>;
  body?: unknown;
}

export const undeclared = 'undeclared method';
export const unknownPath = 'unknown path';
export const isSuccess = (status: number) => status >= 200 && status < 300;
export const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How `generate` fills an operation's inputs. */
export interface GenerateOptions {
  /** The resource whose id fills the item path parameter (`petId` of `/pets/{petId}`). */
  target?: Resource;
  /** Which of the live ids fills the other id parameters and fields, round robin. */
  choice?: number;
  /** Ids that no resource has, in place of live ones. */
  dangling?: boolean;
  /** The body with its required fields only, numbers at their minimum. */
  least?: boolean;
  /** Required parameters only (optional ones are otherwise included at random). */
  requiredOnly?: boolean;
}

export class Run {
  readonly exchanges: Exchange[] = [];
  readonly source: Source;
  readonly resources: Resource[] = [];
  readonly skipped = new Map<string, string>();
  customer: Auth = {};
  admin?: Auth;
  basic?: Credentials;
  /** The bearer key of the account the suite signed up, which owns what Basic made. */
  signedUp: Auth = {};
  seq = 0;
  /** Waited before requests, to stay within the limits. */
  waitedForRateLimitMs = 0;
  /** Waited after 429s the run did not ask for (at most three minutes in all). */
  waitedAfter429Ms = 0;
  readonly coercing = createAjv({ coerceTypes: 'array' });
  readonly textValidators = new Map<Param, ValidateFunction>();
  readonly rateLimits = new RateLimits();
  readonly stated: StatedLimits;
  readonly longestWaitMs: number;
  /** Requests with password credentials that may be refused: each may count as a failed login. */
  readonly logins: { budget: number; sent: number; withheld: string[] };
  /** Whether the run reached 429 by spending the address's limit. */
  spentRateLimit = false;
  /** Why it did not, for the coverage table. */
  rateLimitNote?: string;
  /** The first request of an operation that the set-up sent (the suite's own sign-up). */
  readonly firstRequests = new Map<string, SentRequest>();

  constructor(readonly o: RunOptions) {
    this.source = new Source(o.seed);
    this.stated = statedLimits(o.contract.doc.info);
    this.longestWaitMs = o.longestWaitMs ?? 90_000;
    this.logins = { budget: failedLoginBudget(this.stated), sent: 0, withheld: [] };
  }

  /**
   * Takes one request with password credentials that may be refused from the run's budget;
   * false when it is spent. The password operations come first; the Basic-where-Bearer
   * probes go to as many Bearer operations as the rest allows, a different run of them for
   * each seed, so that runs with other seeds cover the others.
   */
  takeLogin(what: string, op: Operation): boolean {
    if (op.security === 'bearer' && !this.passwordProbed().has(op.id)) {
      this.logins.withheld.push(what);
      return false;
    }
    if (this.logins.sent < this.logins.budget) {
      this.logins.sent++;
      return true;
    }
    this.logins.withheld.push(what);
    return false;
  }

  /**
   * Faults that one step of the service answers for every operation, shared out among the
   * operations `among` picks: the malformed forms of a Bearer Authorization (the first, no
   * header at all, still goes to every Bearer operation), the bodies a body reader refuses
   * whatever the schema, an unknown query parameter. Each form goes to one operation each
   * run, a different one for each seed (form i to operation seed + i), so every form is
   * still sent in every run and, over as many seeds as there are operations, to every
   * operation (contract/README.md, "Within the service's limits").
   */
  shareOut<T>(op: Operation, forms: readonly T[], among: (o: Operation) => boolean, { keepFirst = false } = {}): T[] {
    const ops = this.contract.operations.filter(among);
    const at = ops.findIndex((o) => o.id === op.id);
    if (at < 0) return [];
    if (this.o.everyOperation) return [...forms];
    return forms.filter((_, i) => (keepFirst && i === 0) || (this.o.seed + i) % ops.length === at);
  }

  private probedBearers?: Set<string>;
  private passwordProbed(): Set<string> {
    if (!this.probedBearers) {
      const ops = this.contract.operations;
      const bearers = ops.filter((o) => o.security === 'bearer');
      // Two for each password operation: a wrong password and an unknown account.
      const left = Math.max(0, this.logins.budget - 2 * ops.filter((o) => o.security === 'basic').length);
      const start = bearers.length > 0 ? this.o.seed % bearers.length : 0;
      this.probedBearers = new Set(
        Array.from({ length: Math.min(left, bearers.length) }, (_, i) => bearers[(start + i) % bearers.length]!.id),
      );
    }
    return this.probedBearers;
  }

  get contract() {
    return this.o.contract;
  }
  log(line: string) {
    this.o.log?.(line);
  }

  // ---- callers ---------------------------------------------------------------------

  /** The public sign-up and the Basic-authenticated key issuer, found by their security and body. */
  accountOperations() {
    const ops = this.contract.operations;
    const signUp = ops.find((op) => {
      if (op.security !== 'none' || op.method !== 'post' || !op.body) return false;
      const fields = this.fields(op.body.schema);
      return fields.some(([, s]) => s.format === 'email') && fields.some(([n]) => /pass/i.test(n));
    });
    const issuer = ops.find((op) => op.security === 'basic' && op.method === 'post');
    return { signUp, issuer };
  }

  fields(schema: Schema): Array<[string, Schema]> {
    const s = flatten(schema, this.contract.deref);
    return Object.entries((s.properties ?? {}) as Record<string, unknown>).map(([n, p]) => [n, flatten(p, this.contract.deref)]);
  }

  /** The secret in an issued key's body: a string field named like a key. */
  secretOf(issuer: Operation, body: unknown): string | undefined {
    const status = successStatuses(issuer)[0];
    const schema = status ? issuer.responses.get(status)?.schema : undefined;
    if (!schema || !body || typeof body !== 'object') return undefined;
    const fields = this.fields(schema).filter(([, s]) => typeOf(s) === 'string');
    const named = fields.find(([n]) => /^(key|token|secret|api_?key|access_?token)$/i.test(n)) ?? fields.find(([, s]) => s.pattern);
    const value = named ? (body as Record<string, unknown>)[named[0]] : undefined;
    return typeof value === 'string' ? value : undefined;
  }

  async issueKey(issuer: Operation, credentials: Credentials, label: string): Promise<string | undefined> {
    const headers = { Authorization: `Basic ${b64(`${credentials.email}:${credentials.password}`)}` };
    const body = issuer.body?.required ? this.source.draw(arbitrary(issuer.body.schema, this.contract.deref)) : undefined;
    const ex = await this.send(
      issuer,
      label,
      { kind: 'valid' },
      this.build(issuer, { pathParams: {}, query: [], headers: [], body }, headers),
    );
    return isSuccess(ex.response.status) ? this.secretOf(issuer, ex.response.json) : undefined;
  }

  /** The Authorization an operation is called with: its role's key, or the resource owner's. */
  authFor(op: Operation, owner?: Auth): Record<string, string> | undefined {
    if (op.security === 'none') return {};
    if (op.security === 'basic') {
      return this.basic ? { Authorization: `Basic ${b64(`${this.basic.email}:${this.basic.password}`)}` } : undefined;
    }
    const auth = op.role ? (this.admin?.role === op.role ? this.admin : undefined) : (owner ?? this.customer);
    return auth?.header ? { Authorization: auth.header } : undefined;
  }

  // ---- order and inputs ---------------------------------------------------------------

  producerMade(op: Operation): Producer | undefined {
    return [...this.contract.producers.values()].find((p) => p.op === op);
  }

  /** The path parameter naming the resource an item operation acts on (`petId` in /pets/{petId}). */
  itemParam(op: Operation): string | undefined {
    const last = /\{([^}/]+)\}$/.exec(op.path)?.[1];
    return last && this.contract.producers.has(last) ? last : undefined;
  }

  /** Producer parameters an operation consumes: path parameters and top-level body fields. */
  consumes(op: Operation): string[] {
    const names = op.params.filter((p) => p.in === 'path').map((p) => p.name);
    if (op.body) names.push(...this.fields(op.body.schema).map(([n]) => n));
    return [...new Set(names)].filter((n) => this.contract.producers.has(n) && this.contract.producers.get(n)!.op !== op);
  }

  /**
   * Makers before users: an operation's depth is one more than the deepest maker of an
   * id it needs. At one depth, reads and updates run before creates (stock is set before
   * orders are placed); collection reads run after every create; deletes run last.
   */
  order(): Operation[] {
    const depth = new Map<Operation, number>();
    const depthOf = (op: Operation, seen = new Set<Operation>()): number => {
      if (depth.has(op)) return depth.get(op)!;
      if (seen.has(op)) return 0;
      seen.add(op);
      const d = Math.max(0, ...this.consumes(op).map((n) => 1 + depthOf(this.contract.producers.get(n)!.op, seen)));
      depth.set(op, d);
      return d;
    };
    const ops = this.contract.operations.filter((op) => op.method !== 'delete');
    const key = (op: Operation) => {
      const collectionRead = op.method === 'get' && !op.params.some((p) => p.in === 'path');
      return [collectionRead ? 1000 : depthOf(op), this.producerMade(op) ? 1 : 0, this.contract.operations.indexOf(op)];
    };
    return ops.sort((a, b) => {
      const [ka, kb] = [key(a), key(b)];
      for (let i = 0; i < ka.length; i++) if (ka[i] !== kb[i]) return ka[i]! - kb[i]!;
      return 0;
    });
  }

  live(param: string, own = false): Resource[] {
    return this.resources.filter((r) => r.param === param && !r.deleted && (!own || !r.discovered));
  }

  /** Existing resources for a parameter; when the run made none, asks the collection's list operation. */
  async available(param: string): Promise<Resource[]> {
    const found = this.live(param);
    if (found.length > 0) return found;
    const producer = this.contract.producers.get(param);
    const list = producer?.list;
    const auth = list ? this.authFor(list) : undefined;
    if (!producer || !list || !auth || this.resources.some((r) => r.param === param)) return [];
    const ex = await this.send(
      list,
      `looking for an existing ${param}`,
      { kind: 'valid' },
      this.build(list, { pathParams: {}, query: [], headers: [] }, auth),
    );
    if (Array.isArray(ex.response.json)) {
      for (const item of ex.response.json.slice(0, this.o.runs)) {
        const id = (item as { id?: unknown })?.id;
        if (id !== undefined)
          this.resources.push({ seq: this.seq++, param, id, producer, owner: this.customer, discovered: true, deleted: false });
      }
    }
    return this.live(param);
  }

  /** An id no resource has: the schema's maximum, or a fresh draw for string ids. */
  dangling(schema: Schema): unknown {
    const s = flatten(schema, this.contract.deref);
    if (typeOf(s) === 'integer' || typeOf(s) === 'number') return typeof s.maximum === 'number' ? s.maximum : 2 ** 31 - 1;
    return this.source.draw(arbitrary(s, this.contract.deref, undefined, true));
  }

  /** Fills ids another operation made: `choice` picks among them, round robin (any of them without one); `dangling` fills an id no resource has. */
  override(choice: number | undefined, dangling: boolean): Override {
    return (name, schema) => {
      if (!this.contract.producers.has(name)) return undefined;
      if (dangling) return fc.constant(this.dangling(schema));
      const live = this.live(name);
      if (live.length === 0) return undefined;
      return choice === undefined ? fc.constantFrom(...live.map((r) => r.id)) : fc.constant(live[choice % live.length]!.id);
    };
  }

  generate(op: Operation, options: GenerateOptions = {}): Inputs {
    return this.source.draw(this.inputs(op, { ...options, choice: options.choice ?? 0 }));
  }

  /**
   * The inputs of a request as one fast-check arbitrary, so that a failing request can be
   * shrunk: values toward the schema's least, optional parameters dropped. Without a
   * `choice`, ids come from any live resource.
   */
  inputs(
    op: Operation,
    { target, choice, dangling = false, least = false, requiredOnly = false }: GenerateOptions = {},
  ): fc.Arbitrary<Inputs> {
    const deref = this.contract.deref;
    const override = this.override(choice, dangling);
    const pathParams: Record<string, fc.Arbitrary<unknown>> = {};
    const others: Array<fc.Arbitrary<[Param, unknown] | undefined>> = [];
    for (const p of op.params) {
      if (p.in === 'path') {
        pathParams[p.name] =
          target && p.name === target.param
            ? fc.constant(target.id)
            : (override(p.name, p.schema) ?? arbitrary(p.schema, deref, override, true));
        continue;
      }
      if (!p.required && (p.opaque || requiredOnly)) continue;
      const value = (override(p.name, p.schema) ?? arbitrary(p.schema, deref, override, p.in === 'header')).map((v): [Param, unknown] => [
        p,
        v,
      ]);
      // An optional parameter is sent half the time.
      others.push(p.required ? value : fc.option(value, { nil: undefined, freq: 2 }));
    }
    const bodySchema = op.body && least ? leastOf(op.body.schema, deref) : op.body?.schema;
    const body = bodySchema ? arbitrary(bodySchema, deref, override) : fc.constant(undefined);
    return fc.record({ pathParams: fc.record(pathParams), others: fc.tuple(...others), body }).map(({ pathParams, others, body }) => {
      const sent = others.filter((o): o is [Param, unknown] => o !== undefined);
      return { pathParams, query: sent.filter(([p]) => p.in === 'query'), headers: sent.filter(([p]) => p.in === 'header'), body };
    });
  }

  // ---- requests -----------------------------------------------------------------------

  build(
    op: Operation,
    inputs: Inputs,
    auth: Record<string, string>,
    overrides: { rawBody?: string; contentType?: string | null; extraQuery?: string } = {},
  ): SentRequest {
    const path = op.path.replace(/\{([^}/]+)\}/g, (_, name: string) => encodeURIComponent(String(inputs.pathParams[name])));
    const search: string[] = [];
    for (const [p, value] of inputs.query) {
      if (Array.isArray(value) && p.explode)
        for (const v of value) search.push(`${encodeURIComponent(p.name)}=${encodeURIComponent(String(v))}`);
      else
        search.push(
          `${encodeURIComponent(p.name)}=${encodeURIComponent(Array.isArray(value) ? value.map(String).join(',') : String(value))}`,
        );
    }
    if (overrides.extraQuery) search.push(overrides.extraQuery);
    const headers: Record<string, string> = { Accept: 'application/json', ...auth };
    for (const [p, value] of inputs.headers) headers[p.name] = String(value);
    let body: string | undefined;
    if (overrides.rawBody !== undefined) body = overrides.rawBody;
    else if (inputs.body !== undefined) body = JSON.stringify(inputs.body);
    if (body !== undefined && overrides.contentType !== null) headers['Content-Type'] = overrides.contentType ?? 'application/json';
    return { method: op.method.toUpperCase(), path: search.length > 0 ? `${path}?${search.join('&')}` : path, headers, body };
  }

  /** Sends, checks and records one request. A 429 the suite did not ask for is waited out once. */
  async send(
    op: Operation | undefined,
    label: string,
    expect: Expectation,
    request: SentRequest,
    extra: Partial<Exchange> = {},
    client = this.o.client,
  ): Promise<Exchange> {
    const exchange = await this.exchange(op, label, expect, request, extra, client);
    this.keep(exchange);
    return exchange;
  }

  keep(exchange: Exchange): void {
    this.exchanges.push(exchange);
    this.o.onExchange?.(exchange);
  }

  /** Sends and checks one request, without recording it. */
  async exchange(
    op: Operation | undefined,
    label: string,
    expect: Expectation,
    request: SentRequest,
    extra: Partial<Exchange>,
    client: HttpClient,
  ): Promise<Exchange> {
    const opId = extra.opId ?? op?.id ?? '?';
    const caller = request.headers.Authorization ?? '';
    const paced = client === this.o.client && !extra.spending;
    if (paced) await this.pace(opId, caller);
    let response: ReceivedResponse;
    try {
      response = await client.send(request);
    } catch (error) {
      response = { status: 0, headers: {}, text: `no response: ${error instanceof Error ? error.message : String(error)}`, durationMs: 0 };
    }
    if (client === this.o.client) this.rateLimits.observe(opId, caller, response.headers);
    const base = { opId, op, label, expect, request, response, ...extra };
    const failures = response.status === 0 ? [response.text] : check(base, this.contract, this.o.validator);
    const exchange: Exchange = { ...base, failures };
    const limited = response.status === 429 && paced && !(expect.kind === 'status' && expect.status === 429);
    if (limited && this.waitedAfter429Ms < 180_000) {
      const seconds = Math.min(60, Math.max(1, Number(response.headers['retry-after']) || 1));
      this.log(`  rate limited on ${op?.id ?? request.path}: waiting ${seconds}s as Retry-After says, then sending again`);
      this.waitedAfter429Ms += seconds * 1000;
      // The 429 is an answer like any other: checked and counted, whoever asked.
      this.keep(exchange);
      await sleep(seconds * 1000);
      return this.exchange(op, label, expect, request, extra, client);
    }
    return exchange;
  }

  /** Waits, when a limit this request counts against is down to its reserve, for its window to end. */
  private async pace(opId: string, caller: string): Promise<void> {
    const { ms, partition } = this.rateLimits.waitBefore(opId, caller);
    if (!partition || ms <= 0) return;
    if (ms > this.longestWaitMs) return;
    this.log(
      `  the "${partition.name}" limit (${partition.quota} a ${partition.windowSeconds} s window) is down to ${partition.remaining}: waiting ${(ms / 1000).toFixed(1)} s for its window to end`,
    );
    this.waitedForRateLimitMs += ms;
    await sleep(ms);
    this.rateLimits.renewed(partition);
  }
}
