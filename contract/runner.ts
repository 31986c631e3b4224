// The run: set up callers, then walk the operations of the spec in dependency order
// (an operation runs once the operations that make the ids it needs have run), sending
// valid traffic generated from the schemas and, for each operation, every kind of
// invalid request; then delete what the run made, probe undeclared methods and unknown
// paths, and tally which documented (operation, status) pairs were seen.
import type { ValidateFunction } from 'ajv';
import fc from 'fast-check';
import { check, templateMatches, type Exchange, type Expectation } from './checks';
import type { ResponseValidator } from './checks';
import { arbitrary, brokenBodies, brokenValues, flatten, leastOf, Source, typeOf, type Override } from './generate';
import type { HttpClient, ReceivedResponse, SentRequest } from './http';
import { createAjv, toJsonSchema } from './schema';
import { methods, successStatuses, type Contract, type Operation, type Param, type Producer, type Schema } from './spec';

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
}

export interface CoverageRow {
  opId: string;
  method: string;
  path: string;
  status: string;
  seen: number;
  /** Why the pair cannot be reached in this run; undefined with seen 0 is a gap. */
  unreachable?: string;
}

export interface RunResult {
  seed: number;
  exchanges: Exchange[];
  coverage: CoverageRow[];
  gaps: CoverageRow[];
}

interface Auth {
  header?: string;
  role?: string;
}

interface Resource {
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

interface Inputs {
  pathParams: Record<string, unknown>;
  query: Array<[Param, unknown]>;
  headers: Array<[Param, unknown]>;
  body?: unknown;
}

const undeclared = 'undeclared method';
const unknownPath = 'unknown path';
const isSuccess = (status: number) => status >= 200 && status < 300;
const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How `generate` fills an operation's inputs. */
interface GenerateOptions {
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
  private readonly source: Source;
  private readonly resources: Resource[] = [];
  private readonly skipped = new Map<string, string>();
  private customer: Auth = {};
  private admin?: Auth;
  private basic?: Credentials;
  /** The bearer key of the account the suite signed up, which owns what Basic made. */
  private signedUp: Auth = {};
  private seq = 0;
  private waitedForRateLimitMs = 0;
  private readonly coercing = createAjv({ coerceTypes: 'array' });
  private readonly textValidators = new Map<Param, ValidateFunction>();

  constructor(private readonly o: RunOptions) {
    this.source = new Source(o.seed);
  }

  private get contract() {
    return this.o.contract;
  }
  private log(line: string) {
    this.o.log?.(line);
  }

  async run(): Promise<RunResult> {
    await this.setup();
    const ordered = this.order();
    this.log(`Valid and invalid traffic for ${ordered.length} operations`);
    for (const op of ordered) await this.exercise(op);
    this.log('Deleting what the run made');
    await this.deletePhase();
    this.log('Undeclared methods and unknown paths');
    await this.routingPhase();
    if (this.o.rateLimitedClient) {
      this.log('Rate limit, on the rate-limited instance');
      await this.rateLimitPhase(this.o.rateLimitedClient);
    }
    const coverage = this.coverage();
    return { seed: this.o.seed, exchanges: this.exchanges, coverage, gaps: coverage.filter((r) => r.seen === 0 && !r.unreachable) };
  }

  // ---- callers ---------------------------------------------------------------------

  /** The public sign-up and the Basic-authenticated key issuer, found by their security and body. */
  private accountOperations() {
    const ops = this.contract.operations;
    const signUp = ops.find((op) => {
      if (op.security !== 'none' || op.method !== 'post' || !op.body) return false;
      const fields = this.fields(op.body.schema);
      return fields.some(([, s]) => s.format === 'email') && fields.some(([n]) => /pass/i.test(n));
    });
    const issuer = ops.find((op) => op.security === 'basic' && op.method === 'post');
    return { signUp, issuer };
  }

  private fields(schema: Schema): Array<[string, Schema]> {
    const s = flatten(schema, this.contract.deref);
    return Object.entries((s.properties ?? {}) as Record<string, unknown>).map(([n, p]) => [n, flatten(p, this.contract.deref)]);
  }

  /** The secret in an issued key's body: a string field named like a key. */
  private secretOf(issuer: Operation, body: unknown): string | undefined {
    const status = successStatuses(issuer)[0];
    const schema = status ? issuer.responses.get(status)?.schema : undefined;
    if (!schema || !body || typeof body !== 'object') return undefined;
    const fields = this.fields(schema).filter(([, s]) => typeOf(s) === 'string');
    const named = fields.find(([n]) => /^(key|token|secret|api_?key|access_?token)$/i.test(n)) ?? fields.find(([, s]) => s.pattern);
    const value = named ? (body as Record<string, unknown>)[named[0]] : undefined;
    return typeof value === 'string' ? value : undefined;
  }

  private async issueKey(issuer: Operation, credentials: Credentials, label: string): Promise<string | undefined> {
    const headers = { Authorization: `Basic ${b64(`${credentials.email}:${credentials.password}`)}` };
    const body = issuer.body?.required ? this.source.draw(arbitrary(issuer.body.schema, this.contract.deref)) : undefined;
    const ex = await this.send(issuer, label, { kind: 'valid' }, this.build(issuer, { pathParams: {}, query: [], headers: [], body }, headers));
    return isSuccess(ex.response.status) ? this.secretOf(issuer, ex.response.json) : undefined;
  }

  private async setup(): Promise<void> {
    const { signUp, issuer } = this.accountOperations();
    if (signUp?.body) {
      const body = this.source.draw(arbitrary(signUp.body.schema, this.contract.deref)) as Record<string, unknown>;
      const ex = await this.send(signUp, 'sign-up of the suite\'s own account', { kind: 'valid' }, this.build(signUp, { pathParams: {}, query: [], headers: [], body }, {}));
      const fields = this.fields(signUp.body.schema);
      const email = fields.find(([, s]) => s.format === 'email')?.[0];
      const pass = fields.find(([n]) => /pass/i.test(n))?.[0];
      if (isSuccess(ex.response.status) && email && pass) this.basic = { email: String(body[email]), password: String(body[pass]) };
    }
    if (issuer && this.basic) {
      const key = await this.issueKey(issuer, this.basic, "a key for the suite's own account");
      if (key) this.signedUp = { header: `Bearer ${key}` };
    }
    this.customer = this.o.customerKey ? { header: `Bearer ${this.o.customerKey}` } : this.signedUp;
    if (!this.customer.header) this.log('No customer key: neither --key nor a sign-up that worked');
    let adminKey = this.o.adminKey;
    if (!adminKey && this.o.adminCredentials && issuer) {
      adminKey = await this.issueKey(issuer, this.o.adminCredentials, 'a key for the admin account');
    }
    const roles = new Set(this.contract.operations.map((op) => op.role).filter((r): r is string => !!r));
    if (adminKey) this.admin = { header: `Bearer ${adminKey}`, role: [...roles][0] };
  }

  /** The Authorization an operation is called with: its role's key, or the resource owner's. */
  private authFor(op: Operation, owner?: Auth): Record<string, string> | undefined {
    if (op.security === 'none') return {};
    if (op.security === 'basic') {
      return this.basic ? { Authorization: `Basic ${b64(`${this.basic.email}:${this.basic.password}`)}` } : undefined;
    }
    const auth = op.role ? (this.admin?.role === op.role ? this.admin : undefined) : owner ?? this.customer;
    return auth?.header ? { Authorization: auth.header } : undefined;
  }

  // ---- order and inputs ---------------------------------------------------------------

  private producerMade(op: Operation): Producer | undefined {
    return [...this.contract.producers.values()].find((p) => p.op === op);
  }

  /** The path parameter naming the resource an item operation acts on (`petId` in /pets/{petId}). */
  private itemParam(op: Operation): string | undefined {
    const last = /\{([^}/]+)\}$/.exec(op.path)?.[1];
    return last && this.contract.producers.has(last) ? last : undefined;
  }

  /** Producer parameters an operation consumes: path parameters and top-level body fields. */
  private consumes(op: Operation): string[] {
    const names = op.params.filter((p) => p.in === 'path').map((p) => p.name);
    if (op.body) names.push(...this.fields(op.body.schema).map(([n]) => n));
    return [...new Set(names)].filter((n) => this.contract.producers.has(n) && this.contract.producers.get(n)!.op !== op);
  }

  /**
   * Makers before users: an operation's depth is one more than the deepest maker of an
   * id it needs. At one depth, reads and updates run before creates (stock is set before
   * orders are placed); collection reads run after every create; deletes run last.
   */
  private order(): Operation[] {
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

  private live(param: string, own = false): Resource[] {
    return this.resources.filter((r) => r.param === param && !r.deleted && (!own || !r.discovered));
  }

  /** Existing resources for a parameter; when the run made none, asks the collection's list operation. */
  private async available(param: string): Promise<Resource[]> {
    const found = this.live(param);
    if (found.length > 0) return found;
    const producer = this.contract.producers.get(param);
    const list = producer?.list;
    const auth = list ? this.authFor(list) : undefined;
    if (!producer || !list || !auth || this.resources.some((r) => r.param === param)) return [];
    const ex = await this.send(list, `looking for an existing ${param}`, { kind: 'valid' }, this.build(list, { pathParams: {}, query: [], headers: [] }, auth));
    if (Array.isArray(ex.response.json)) {
      for (const item of ex.response.json.slice(0, this.o.runs)) {
        const id = (item as { id?: unknown })?.id;
        if (id !== undefined) this.resources.push({ seq: this.seq++, param, id, producer, owner: this.customer, discovered: true, deleted: false });
      }
    }
    return this.live(param);
  }

  /** An id no resource has: the schema's maximum, or a fresh draw for string ids. */
  private dangling(schema: Schema): unknown {
    const s = flatten(schema, this.contract.deref);
    if (typeOf(s) === 'integer' || typeOf(s) === 'number') return typeof s.maximum === 'number' ? s.maximum : 2 ** 31 - 1;
    return this.source.draw(arbitrary(s, this.contract.deref, undefined, true));
  }

  /** Fills ids another operation made: `choice` picks among them, round robin (any of them without one); `dangling` fills an id no resource has. */
  private override(choice: number | undefined, dangling: boolean): Override {
    return (name, schema) => {
      if (!this.contract.producers.has(name)) return undefined;
      if (dangling) return fc.constant(this.dangling(schema));
      const live = this.live(name);
      if (live.length === 0) return undefined;
      return choice === undefined ? fc.constantFrom(...live.map((r) => r.id)) : fc.constant(live[choice % live.length]!.id);
    };
  }

  private generate(op: Operation, options: GenerateOptions = {}): Inputs {
    return this.source.draw(this.inputs(op, { ...options, choice: options.choice ?? 0 }));
  }

  /**
   * The inputs of a request as one fast-check arbitrary, so that a failing request can be
   * shrunk: values toward the schema's least, optional parameters dropped. Without a
   * `choice`, ids come from any live resource.
   */
  private inputs(op: Operation, { target, choice, dangling = false, least = false, requiredOnly = false }: GenerateOptions = {}): fc.Arbitrary<Inputs> {
    const deref = this.contract.deref;
    const override = this.override(choice, dangling);
    const pathParams: Record<string, fc.Arbitrary<unknown>> = {};
    const others: Array<fc.Arbitrary<[Param, unknown] | undefined>> = [];
    for (const p of op.params) {
      if (p.in === 'path') {
        pathParams[p.name] = target && p.name === target.param ? fc.constant(target.id) : (override(p.name, p.schema) ?? arbitrary(p.schema, deref, override, true));
        continue;
      }
      if (!p.required && (p.opaque || requiredOnly)) continue;
      const value = (override(p.name, p.schema) ?? arbitrary(p.schema, deref, override, p.in === 'header')).map((v): [Param, unknown] => [p, v]);
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

  private build(op: Operation, inputs: Inputs, auth: Record<string, string>, overrides: { rawBody?: string; contentType?: string | null; extraQuery?: string } = {}): SentRequest {
    const path = op.path.replace(/\{([^}/]+)\}/g, (_, name: string) => encodeURIComponent(String(inputs.pathParams[name])));
    const search: string[] = [];
    for (const [p, value] of inputs.query) {
      if (Array.isArray(value) && p.explode) for (const v of value) search.push(`${encodeURIComponent(p.name)}=${encodeURIComponent(String(v))}`);
      else search.push(`${encodeURIComponent(p.name)}=${encodeURIComponent(Array.isArray(value) ? value.map(String).join(',') : String(value))}`);
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
  private async send(op: Operation | undefined, label: string, expect: Expectation, request: SentRequest, extra: Partial<Exchange> = {}, client = this.o.client): Promise<Exchange> {
    const exchange = await this.exchange(op, label, expect, request, extra, client);
    this.keep(exchange);
    return exchange;
  }

  private keep(exchange: Exchange): void {
    this.exchanges.push(exchange);
    this.o.onExchange?.(exchange);
  }

  /** Sends and checks one request, without recording it. */
  private async exchange(op: Operation | undefined, label: string, expect: Expectation, request: SentRequest, extra: Partial<Exchange>, client: HttpClient): Promise<Exchange> {
    let response: ReceivedResponse;
    try {
      response = await client.send(request);
    } catch (error) {
      response = { status: 0, headers: {}, text: `no response: ${error instanceof Error ? error.message : String(error)}`, durationMs: 0 };
    }
    const base = { opId: extra.opId ?? op?.id ?? '?', op, label, expect, request, response, ...extra };
    const failures = response.status === 0 ? [response.text] : check(base, this.contract, this.o.validator);
    const exchange: Exchange = { ...base, failures };
    const limited = response.status === 429 && client === this.o.client && !(expect.kind === 'status' && expect.status === 429);
    if (limited && this.waitedForRateLimitMs < 180_000) {
      const seconds = Math.min(60, Math.max(1, Number(response.headers['retry-after']) || 1));
      this.log(`  rate limited on ${op?.id ?? request.path}: waiting ${seconds}s as Retry-After says, then sending again`);
      this.waitedForRateLimitMs += seconds * 1000;
      // The 429 is an answer like any other: checked and counted, whoever asked.
      this.keep(exchange);
      await sleep(seconds * 1000);
      return this.exchange(op, label, expect, request, extra, client);
    }
    return exchange;
  }

  // ---- one operation ------------------------------------------------------------------

  private async exercise(op: Operation): Promise<void> {
    const auth = this.authFor(op);
    if (!auth) {
      this.skipped.set(op.id, op.role ? `needs a key with the ${op.role} role (--admin-key)` : 'no credentials for its security scheme');
    } else if (this.producerMade(op)) {
      await this.exerciseCreate(op, this.producerMade(op)!);
    } else if (this.itemParam(op)) {
      await this.exerciseItem(op);
    } else {
      await this.exerciseOther(op, auth);
    }
    await this.invalidTraffic(op);
  }

  private async exerciseCreate(op: Operation, producer: Producer): Promise<void> {
    const usesIds = this.consumes(op).length > 0;
    const auth = this.authFor(op)!;
    let made = 0;
    let first: SentRequest | undefined;
    const attempt = async (inputs: Inputs, label: string) => {
      const request = this.build(op, inputs, auth);
      first ??= request;
      const ex = await this.send(op, label, { kind: 'valid' }, request);
      if (isSuccess(ex.response.status)) {
        made++;
        this.record(op, ex, inputs.body, auth);
      }
      return ex.response.status;
    };
    // At least two of each, whatever --runs says: one to change, one left as it was made.
    for (let i = 0; i < Math.max(this.o.runs, 2); i++) {
      // A business rule may refuse one parent (no stock, not available): try the next one.
      for (let next = 0; next < (usesIds ? 3 : 1); next++) {
        const status = await attempt(this.generate(op, { choice: i + next }), 'valid');
        if (status < 400 || status >= 500) break;
      }
    }
    // Later steps need two of each (one to complete, one left open). When business rules
    // refused the generated requests, set the parents up afresh with their own update
    // operations and ask for the least: required fields only, numbers at their minimum.
    const wanted = 2;
    for (let round = 0; usesIds && made < wanted && round < 6; round++) {
      await this.refreshParents(op);
      const parents = Math.max(...this.consumes(op).map((n) => this.live(n, true).length), 1);
      for (let choice = 0; choice < parents && made < wanted; choice++) {
        await attempt(this.generate(op, { choice: choice + round, least: true }), 'valid, the least the schema allows');
      }
    }
    if (first) {
      const again = await this.send(op, 'the first valid request again, unchanged', { kind: 'valid' }, first);
      if (isSuccess(again.response.status)) this.record(op, again, first.body === undefined ? undefined : JSON.parse(first.body), auth);
    }
    await this.headerReplay(op);
    if (usesIds) {
      const inputs = this.generate(op, { dangling: true });
      await this.send(op, 'a body naming ids that do not exist', { kind: 'invalid' }, this.build(op, inputs, auth));
    }
  }

  /** Sends fresh valid updates (PUT, PATCH) to the resources an operation's ids name. */
  private async refreshParents(op: Operation): Promise<void> {
    for (const param of this.consumes(op)) {
      const updates = this.contract.operations.filter((u) => (u.method === 'put' || u.method === 'patch') && this.itemParam(u) === param);
      for (const update of updates) {
        for (const [i, target] of this.live(param, true).entries()) {
          const auth = this.authFor(update, target.owner);
          if (!auth) continue;
          await this.send(update, `valid, setting up ${param} ${String(target.id)} again for ${op.id}`, { kind: 'valid' }, this.build(update, this.generate(update, { target, choice: i }), auth));
        }
      }
    }
  }

  /**
   * With every header parameter set (an Idempotency-Key), the same request twice and then
   * the same headers with another body: the answers must stay within the contract.
   */
  private async headerReplay(op: Operation): Promise<void> {
    const headerParams = op.params.filter((p) => p.in === 'header');
    const auth = this.authFor(op);
    if (headerParams.length === 0 || !auth) return;
    const inputs = this.generate(op);
    inputs.headers = headerParams.map((p) => [p, this.source.draw(arbitrary(p.schema, this.contract.deref, undefined, true))]);
    const request = this.build(op, inputs, auth);
    const ex = await this.send(op, `valid, with header ${headerParams.map((p) => p.name).join(', ')}`, { kind: 'valid' }, request);
    if (isSuccess(ex.response.status)) this.record(op, ex, inputs.body, auth);
    await this.send(op, 'the same request with the same headers again', { kind: 'valid' }, request);
    const other = this.generate(op, { choice: 1 });
    if (JSON.stringify(other.body) !== JSON.stringify(inputs.body)) {
      await this.send(op, 'the same headers with another body', { kind: 'valid' }, this.build(op, { ...other, headers: inputs.headers }, auth));
    }
  }

  private record(op: Operation, ex: Exchange, body: unknown, auth: Record<string, string>): void {
    const producer = this.producerMade(op);
    const id = (ex.response.json as { id?: unknown } | undefined)?.id;
    if (!producer || id === undefined) return;
    if (this.resources.some((r) => r.param === producer.param && r.id === id)) return;
    const owner = op.security === 'basic' ? this.signedUp : { header: auth.Authorization };
    this.resources.push({ seq: this.seq++, param: producer.param, id, producer, body, owner, discovered: false, deleted: false });
  }

  private async exerciseItem(op: Operation): Promise<void> {
    const param = this.itemParam(op)!;
    const mutating = op.method !== 'get';
    const own = this.live(param, true);
    const targets = (mutating ? own : await this.available(param)).slice(0, Math.max(this.o.runs, 2));
    if (targets.length === 0) this.skipped.set(op.id, `no ${param} to act on: nothing made one in this run`);
    // Updates leave the last resource as it was made, so later steps meet both kinds.
    const acted = mutating && targets.length > 1 ? targets.slice(0, -1) : targets;
    for (const [i, target] of acted.entries()) {
      const inputs = this.generate(op, { target, choice: i });
      await this.send(op, 'valid', { kind: 'valid' }, this.build(op, inputs, this.authFor(op, target.owner)!));
    }
    // Replacing one resource with the body another was made with (a duplicate name).
    const producer = this.contract.producers.get(param)!;
    const sameBody = op.body && producer.op.body && JSON.stringify(op.body.schema) === JSON.stringify(producer.op.body.schema);
    const last = targets[targets.length - 1];
    if (op.method === 'put' && sameBody && targets.length > 1 && last?.body !== undefined) {
      const inputs = { ...this.generate(op, { target: targets[0] }), body: last.body };
      await this.send(op, `the body ${param} ${String(last.id)} was made with`, { kind: 'valid' }, this.build(op, inputs, this.authFor(op, targets[0]!.owner)!));
    }
    const schema = op.params.find((p) => p.name === param)!.schema;
    const ghost: Resource = { seq: -1, param, id: this.dangling(schema), producer, owner: this.customer, discovered: true, deleted: false };
    await this.send(op, `a ${param} that does not exist`, { kind: 'invalid' }, this.build(op, this.generate(op, { target: ghost }), this.authFor(op)!));
    if (op.body && this.consumes(op).some((n) => n !== param) && targets[0]) {
      const inputs = this.generate(op, { target: targets[0], dangling: true });
      inputs.pathParams[param] = targets[0].id;
      await this.send(op, 'a body naming ids that do not exist', { kind: 'invalid' }, this.build(op, inputs, this.authFor(op, targets[0].owner)!));
    }
  }

  /**
   * Valid requests as a fast-check property (`runs` of them): every answer must pass
   * every check. When one fails, fast-check shrinks its inputs (smaller values, optional
   * parameters left out) while the failure holds, and the smallest failing request is the
   * one reported; the run's seed repeats it. The shrinking attempts are not recorded.
   */
  private async validProperty(op: Operation, label: string, inputs: fc.Arbitrary<Inputs>, auth: Record<string, string>, onPass?: (ex: Exchange, request: SentRequest) => Promise<void>): Promise<void> {
    let smallest: Exchange | undefined;
    const property = fc.asyncProperty(inputs, async (sample) => {
      const request = this.build(op, sample, auth);
      const ex = await this.exchange(op, label, { kind: 'valid' }, request, {}, this.o.client);
      if (ex.failures.length > 0) {
        smallest = ex;
        return false;
      }
      if (!smallest) {
        this.keep(ex);
        await onPass?.(ex, request);
      }
      return true;
    });
    const details = await fc.check(property, { seed: this.source.int(2 ** 31), numRuns: this.o.runs });
    if (smallest) this.keep({ ...smallest, label: `${label}, shrunk by fast-check to the smallest failing request (${details.numShrinks} steps)` });
  }

  private async exerciseOther(op: Operation, auth: Record<string, string>): Promise<void> {
    let followed = false;
    // The first page's Link rel="next" is followed once: the server's own cursor must work.
    const followNext = async (ex: Exchange, request: SentRequest) => {
      const next = /<([^>]+)>\s*;\s*rel="?next"?/.exec(ex.response.headers.link ?? '')?.[1];
      if (!next || followed) return;
      followed = true;
      const url = new URL(next, this.o.client.url('/'));
      const prefix = this.o.client.url('/').pathname.replace(/\/$/, '');
      const path = url.pathname.slice(prefix.length) + url.search;
      await this.send(op, 'the next page from Link rel="next"', { kind: 'valid' }, { ...request, path });
    };

    // The plainest request first: required parameters only must succeed.
    const first = this.build(op, this.generate(op, { requiredOnly: true }), auth);
    await followNext(await this.send(op, 'valid, required parameters only', { kind: 'valid' }, first), first);
    // Integer query parameters at their minimum (a page of one), so a next page exists.
    const least = op.params.filter((p) => p.in === 'query' && typeOf(flatten(p.schema, this.contract.deref)) === 'integer' && typeof flatten(p.schema, this.contract.deref).minimum === 'number');
    if (least.length > 0) {
      const inputs = this.generate(op, { requiredOnly: true });
      inputs.query.push(...least.map((p): [Param, unknown] => [p, flatten(p.schema, this.contract.deref).minimum]));
      const request = this.build(op, inputs, auth);
      await followNext(await this.send(op, `valid, ${least.map((p) => p.name).join(', ')} at the minimum`, { kind: 'valid' }, request), request);
    }
    await this.validProperty(op, 'valid', this.inputs(op), auth, followNext);

    if (op.method === 'get' && op.security === 'bearer' && auth.Authorization) {
      // The scheme name is case-insensitive (RFC 9110): `bearer` must work as `Bearer` does.
      const lower = { Authorization: auth.Authorization.replace(/^Bearer/, 'bearer') };
      await this.send(op, 'the scheme written "bearer"', { kind: 'not-status', status: 401 }, this.build(op, this.generate(op), lower));
    }
    if (op.method === 'post') await this.send(op, 'the first valid request again, unchanged', { kind: 'valid' }, first);
  }

  // ---- invalid traffic ----------------------------------------------------------------

  private async invalidTraffic(op: Operation): Promise<void> {
    const param = this.itemParam(op);
    const target = param ? (op.method === 'get' ? (await this.available(param))[0] : this.live(param, true)[0]) : undefined;
    const auth = this.authFor(op, target?.owner);
    const inputs = this.generate(op, { target });
    if (param && !target) {
      const schema = op.params.find((p) => p.name === param)!.schema;
      inputs.pathParams[param] = this.dangling(schema);
    }
    await this.authProbes(op, inputs);
    if (!auth) return;
    const send = (label: string, expect: Expectation, request: SentRequest) => this.send(op, label, expect, request);

    for (const p of op.params) {
      for (const broken of brokenValues(flatten(p.schema, this.contract.deref), this.contract.deref)) {
        const text = broken.raw ?? (Array.isArray(broken.value) ? broken.value.map(String).join(',') : String(broken.value));
        if (broken.value === null || (typeof broken.value === 'object' && !Array.isArray(broken.value))) continue;
        if (p.in === 'header' && !/^[\x20-\x7e]*$/.test(text)) continue;
        if (p.in === 'path' && text === '') continue;
        // Parameters travel as text: "12" is a fine integer there, so only text that breaks the schema counts.
        if (this.acceptsText(p, text)) continue;
        const changed: Inputs = { ...inputs, pathParams: { ...inputs.pathParams }, query: inputs.query.filter(([q]) => q !== p), headers: inputs.headers.filter(([h]) => h !== p) };
        const raw = p.in === 'query' && Array.isArray(broken.value) && p.explode ? broken.value : text;
        if (p.in === 'path') changed.pathParams[p.name] = text;
        else (p.in === 'query' ? changed.query : changed.headers).push([p, raw]);
        await send(`${p.in} parameter "${p.name}" ${broken.label}`, { kind: 'invalid' }, this.build(op, changed, auth));
      }
      if (p.required && p.in !== 'path') {
        const without: Inputs = { ...inputs, query: inputs.query.filter(([q]) => q !== p), headers: inputs.headers.filter(([h]) => h !== p) };
        await send(`without required ${p.in} parameter "${p.name}"`, { kind: 'invalid' }, this.build(op, without, auth));
      }
    }
    await send('an unknown query parameter', { kind: 'invalid' }, this.build(op, inputs, auth, { extraQuery: 'unexpectedParameter=1' }));

    if (!op.body) return;
    const limit = this.o.bodyLimitBytes;
    for (const broken of brokenBodies(op.body.schema, inputs.body, this.contract.deref, limit)) {
      const tooLarge = broken.text.length > limit;
      const expect: Expectation = tooLarge && op.responses.has('413') ? { kind: 'status', status: 413 } : { kind: 'invalid' };
      await send(`a body ${broken.label}`, expect, this.build(op, inputs, auth, { rawBody: broken.text }));
    }
    const text = JSON.stringify(inputs.body ?? {});
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
      await send(`a JSON body sent as ${type}`, { kind: 'invalid' }, this.build(op, inputs, auth, { rawBody: text, contentType: type }));
    }
    await send('a JSON body without Content-Type', { kind: 'invalid' }, this.build(op, inputs, auth, { rawBody: text, contentType: null }));
    if (op.body.required) {
      await send('no body where one is required', { kind: 'invalid' }, this.build(op, { ...inputs, body: undefined }, auth));
    }
  }

  /** Whether a parameter's schema accepts this text, read the way a server coerces it. */
  private acceptsText(p: Param, text: string): boolean {
    const schema = this.inline(p.schema);
    const value = typeOf(schema) === 'array' && !p.explode ? text.split(',') : text;
    let fn = this.textValidators.get(p);
    if (!fn) {
      fn = this.coercing.compile({ type: 'object', properties: { v: schema } });
      this.textValidators.set(p, fn);
    }
    return fn({ v: value });
  }

  /** A schema with its `$ref`s replaced by what they name (parameter schemas are small). */
  private inline(schema: unknown, depth = 0): Schema {
    if (depth > 16 || !schema || typeof schema !== 'object') return schema as Schema;
    const s = this.contract.deref(schema);
    const out: Schema = {};
    for (const [k, v] of Object.entries(s)) {
      out[k] = Array.isArray(v) ? v.map((x) => (x && typeof x === 'object' ? this.inline(x, depth + 1) : x)) : v && typeof v === 'object' && k !== 'enum' && k !== 'example' ? this.inline(v, depth + 1) : v;
    }
    return toJsonSchema(out) as Schema;
  }

  /** Every malformed Authorization form is 401; a customer on an admin operation is 403. */
  private async authProbes(op: Operation, inputs: Inputs): Promise<void> {
    const probe = (label: string, headers: Record<string, string>, status: number) =>
      this.send(op, label, { kind: 'status', status }, this.build(op, inputs, headers));
    if (op.security === 'bearer') {
      const key = (this.customer.header ?? this.admin?.header ?? 'Bearer placeholder-key').replace(/^Bearer /, '');
      // Same prefix and length as a real key. One draw whatever the key looks like, so the
      // server's random keys do not shift the seeded sequence.
      const prefix = /^[A-Za-z]+_(?:[A-Za-z]+_)?/.exec(key)?.[0] ?? '';
      const tail = this.source.draw(fc.stringMatching(/^[A-Za-z0-9]{64}$/));
      const unknown = prefix + tail.slice(0, Math.max(16, key.length - prefix.length));
      const forms: Array<[string, string | undefined]> = [
        ['no Authorization header', undefined],
        ['Authorization "Bearer" without a key', 'Bearer'],
        ['Authorization "Bearer " with an empty key', 'Bearer '],
        ['a key without the Bearer scheme', key],
        ['the key under another scheme (Token)', `Token ${key}`],
        ['the key under the Basic scheme', `Basic ${key}`],
        ['Basic credentials where a Bearer key is needed', `Basic ${b64('someone@example.com:some password')}`],
        ['"Bearer <key> <extra>"', `Bearer ${key} extra`],
        ['"Bearer,<key>"', `Bearer,${key}`],
        ['a tab between scheme and key', `Bearer\t${key}`],
        ['a well-formed key that does not exist', `Bearer ${unknown}`],
      ];
      for (const [label, value] of forms) await probe(label, value === undefined ? {} : { Authorization: value }, 401);
      if (op.role && this.customer.header && this.customer !== this.admin) {
        await probe(`a customer key on an operation for ${op.role}s`, { Authorization: this.customer.header }, 403);
      }
    } else if (op.security === 'basic') {
      const email = this.basic?.email ?? 'someone@example.com';
      const forms: Array<[string, string | undefined]> = [
        ['no Authorization header', undefined],
        ['a wrong password', `Basic ${b64(`${email}:not the password`)}`],
        ['an unknown account', `Basic ${b64('nobody-at-all@example.com:some password')}`],
        ['Basic credentials without a colon', `Basic ${b64(email)}`],
        ['Basic credentials that are not base64', 'Basic !!!not-base64!!!'],
        ['"Basic" without credentials', 'Basic'],
        ['a Bearer key where Basic is needed', this.customer.header ?? 'Bearer ps_live_unknown'],
      ];
      for (const [label, value] of forms) await probe(label, value === undefined ? {} : { Authorization: value }, 401);
    }
  }

  // ---- deletes ------------------------------------------------------------------------

  private async deletePhase(): Promise<void> {
    const deletes = this.contract.operations.filter((op) => op.method === 'delete');
    for (const op of deletes) {
      if (!this.authFor(op)) this.skipped.set(op.id, op.role ? `needs a key with the ${op.role} role (--admin-key)` : 'no credentials');
      const param = this.itemParam(op);
      if (!param) {
        if (this.authFor(op)) await this.exerciseOther(op, this.authFor(op)!);
      } else {
        const schema = op.params.find((p) => p.name === param)!.schema;
        const producer = this.contract.producers.get(param)!;
        const ghost: Resource = { seq: -1, param, id: this.dangling(schema), producer, owner: this.customer, discovered: true, deleted: false };
        if (this.authFor(op)) await this.send(op, `a ${param} that does not exist`, { kind: 'invalid' }, this.build(op, this.generate(op, { target: ghost }), this.authFor(op)!));
        if (this.live(param, true).length === 0) this.skipped.set(op.id, `no ${param} to delete: nothing made one in this run`);
      }
      await this.invalidTraffic(op);
    }
    const byParam = new Map(deletes.map((op) => [this.itemParam(op), op]));
    const attempt = async (r: Resource) => {
      const op = byParam.get(r.param);
      const auth = op ? this.authFor(op, r.owner) : undefined;
      if (!op || !auth || r.deleted || r.discovered) return;
      const ex = await this.send(op, 'valid', { kind: 'valid' }, this.build(op, this.generate(op, { target: r }), auth));
      if (!isSuccess(ex.response.status)) return;
      r.deleted = true;
      const get = this.contract.find('get', op.path);
      const getAuth = get ? this.authFor(get, r.owner) : undefined;
      if (get && getAuth) {
        await this.send(get, `the ${r.param} after a successful DELETE`, { kind: 'status', status: 404 }, this.build(get, this.generate(get, { target: r }), getAuth));
      }
      await this.send(op, 'the same DELETE again', { kind: 'valid' }, this.build(op, this.generate(op, { target: r }), auth));
    };
    // First in the order things were made (parents first: their dependants refuse it),
    // then the other way round, once the dependants are gone.
    const own = this.resources.filter((r) => !r.discovered).sort((a, b) => a.seq - b.seq);
    for (const r of own) await attempt(r);
    for (const r of [...own].reverse()) await attempt(r);
  }

  // ---- routing ------------------------------------------------------------------------

  private async routingPhase(): Promise<void> {
    const auth: Record<string, string> = this.customer.header ? { Authorization: this.customer.header } : {};
    for (const path of this.contract.paths) {
      const declared = methods.filter((m) => this.contract.find(m, path));
      const sample = this.contract.find(declared[0]!, path)!;
      const inputs = this.generate(sample);
      for (const [name] of Object.entries(inputs.pathParams)) {
        const live = this.live(name);
        if (live[0]) inputs.pathParams[name] = live[0].id;
      }
      const concrete = this.build(sample, { ...inputs, query: [], headers: [] }, auth).path;
      const allowed = declared.map((m) => m.toUpperCase());
      for (const method of methods.filter((m) => !declared.includes(m))) {
        await this.send(undefined, `${method.toUpperCase()} on ${path}, which declares ${allowed.join(', ')}`, { kind: 'status', status: 405 },
          { method: method.toUpperCase(), path: concrete, headers: { Accept: 'application/json', ...auth } }, { opId: undeclared, allowed });
      }
      // Deep enough below the path that no template of the spec matches it.
      let unknown = concrete.replace(/\/$/, '');
      do unknown += '/no-such-path';
      while (this.contract.paths.some((t) => templateMatches(t, unknown)));
      await this.send(undefined, `a path under ${path} that the spec does not have`, { kind: 'status', status: 404 },
        { method: 'GET', path: unknown, headers: { Accept: 'application/json', ...auth } }, { opId: unknownPath });
    }
    await this.send(undefined, 'a path the spec does not have', { kind: 'status', status: 404 },
      { method: 'GET', path: '/no-such-path-in-the-spec', headers: { Accept: 'application/json', ...auth } }, { opId: unknownPath });
  }

  /** On an instance that allows one request a minute, the second request of a caller is 429. */
  private async rateLimitPhase(client: HttpClient): Promise<void> {
    const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
    for (const op of this.contract.operations.filter((o) => o.responses.has('429'))) {
      const secret = Array.from({ length: 40 }, () => alphabet[this.source.int(alphabet.length)]).join('');
      const auth: Record<string, string> = op.security === 'bearer' ? { Authorization: `Bearer ps_live_${secret}` } : {};
      const inputs = this.generate(op);
      const request = this.build(op, inputs, auth);
      await this.send(op, 'the first request of a caller on the rate-limited instance', { kind: 'valid' }, request, {}, client);
      await this.send(op, 'the second request of that caller within the minute', { kind: 'status', status: 429 }, request, {}, client);
    }
  }

  // ---- coverage -----------------------------------------------------------------------

  private coverage(): CoverageRow[] {
    const seen = new Map<string, number>();
    for (const ex of this.exchanges) {
      const key = `${ex.opId} ${ex.response.status}`;
      seen.set(key, (seen.get(key) ?? 0) + 1);
    }
    const rows: CoverageRow[] = [];
    for (const op of this.contract.operations) {
      for (const status of op.responses.keys()) {
        if (status === 'default') continue;
        const count = [...seen.entries()].filter(([k]) => {
          const [id, s] = [k.slice(0, k.lastIndexOf(' ')), k.slice(k.lastIndexOf(' ') + 1)];
          return id === op.id && (s === status || (status.endsWith('XX') && s[0] === status[0]));
        }).reduce((n, [, c]) => n + c, 0);
        rows.push({ opId: op.id, method: op.method.toUpperCase(), path: op.path, status, seen: count, unreachable: count > 0 ? undefined : this.reason(op, status) });
      }
    }
    rows.push({ opId: undeclared, method: '*', path: '(every path)', status: '405', seen: seen.get(`${undeclared} 405`) ?? 0 });
    rows.push({ opId: unknownPath, method: 'GET', path: '(not in the spec)', status: '404', seen: seen.get(`${unknownPath} 404`) ?? 0 });
    return rows;
  }

  private reason(op: Operation, status: string): string | undefined {
    if (status === '429') return this.o.rateLimitedClient ? undefined : this.o.rateLimitReason;
    if (status === '503') return 'needs the database to be unreachable; the suite does not inject faults';
    if (status.startsWith('5')) return 'needs a fault on the service\'s side; the suite does not inject faults';
    if (op.role && !this.admin && status !== '401' && status !== '403') return `needs a key with the ${op.role} role (--admin-key)`;
    // A business-rule conflict can hinge on state only an admin makes (a completed order).
    const roles = this.contract.operations.filter((o) => o.role).map((o) => o.role);
    if (!this.admin && roles.length > 0 && (status === '409' || status === '422')) {
      return `may need state that only operations for the ${roles[0]} role make (no --admin-key)`;
    }
    return this.skipped.get(op.id) && !['400', '401', '403'].includes(status) ? this.skipped.get(op.id) : undefined;
  }
}

export const runSuite = (options: RunOptions) => new Run(options).run();
