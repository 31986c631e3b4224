// What the suite knows of the service's limits, so that a run stays within them and leaves
// the runner's address as it found it: the request limits from every answer's IETF
// `RateLimit-Policy` / `RateLimit` headers (draft 8: `"name"; q=600; w=60; pk=:..:` and
// `"name"; r=599; t=60`), and from the spec's `info.x-limits` what no header says (failed
// password logins, keys per account).

export interface Partition {
  /** The policy's name and partition key. */
  key: string;
  name: string;
  quota: number;
  windowSeconds: number;
  remaining: number;
  /** When the window ends, in ms since the epoch (as of the last answer that named it). */
  resetAt: number;
  /** The operations and callers whose answers named it. */
  ops: Set<string>;
  callers: Set<string>;
}

interface Item {
  name: string;
  params: Record<string, string>;
}

/** A structured-field list (RFC 8941) of items with parameters: enough for the two headers. */
export function parseItems(header: string | undefined): Item[] {
  if (!header) return [];
  const items: Item[] = [];
  let current = '';
  let quoted = false;
  const parts: string[] = [];
  for (const ch of header) {
    if (ch === '"') quoted = !quoted;
    if (ch === ',' && !quoted) {
      parts.push(current);
      current = '';
    } else current += ch;
  }
  parts.push(current);
  for (const part of parts) {
    const [head = '', ...rest] = part.split(';').map((s) => s.trim());
    if (!head) continue;
    const params: Record<string, string> = {};
    for (const p of rest) {
      const at = p.indexOf('=');
      if (at > 0) params[p.slice(0, at).trim()] = p.slice(at + 1).trim();
    }
    items.push({ name: head.replace(/^"|"$/g, ''), params });
  }
  return items;
}

/** What the run keeps back of every request limit, so that the runner is never refused. */
export const reserveOf = (quota: number) => Math.max(2, Math.ceil(quota / 50));

export class RateLimits {
  private readonly partitions = new Map<string, Partition>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Reads the headers of one answer to `opId` sent by `caller` (its Authorization, '' for none). */
  observe(opId: string, caller: string, headers: Record<string, string>): void {
    const policies = parseItems(headers['ratelimit-policy']);
    const states = new Map(parseItems(headers['ratelimit']).map((i) => [i.name, i.params]));
    const at = this.now();
    for (const policy of policies) {
      const quota = Number(policy.params.q);
      const state = states.get(policy.name);
      if (!Number.isFinite(quota) || !state) continue;
      const key = `${policy.name} ${policy.params.pk ?? ''}`;
      const known = this.partitions.get(key);
      const partition: Partition = known ?? {
        key,
        name: policy.name,
        quota,
        windowSeconds: Number(policy.params.w ?? 60),
        remaining: quota,
        resetAt: at,
        ops: new Set(),
        callers: new Set(),
      };
      partition.quota = quota;
      partition.remaining = Number(state.r ?? quota);
      partition.resetAt = at + Number(state.t ?? partition.windowSeconds) * 1000;
      partition.ops.add(opId);
      partition.callers.add(caller);
      this.partitions.set(key, partition);
    }
  }

  /**
   * The partitions a request counts against, as far as the answers so far tell: those
   * named for this caller or for several callers, and for this operation or for several.
   * (The address is named for everyone, an account's for its key, sign-ups for their one
   * operation.)
   */
  relevant(opId: string, caller: string): Partition[] {
    return [...this.partitions.values()].filter(
      (p) => (p.callers.has(caller) || p.callers.size >= 2) && (p.ops.has(opId) || p.ops.size >= 2),
    );
  }

  /** How long to wait before sending, so that no partition the request counts against goes below its reserve. */
  waitBefore(opId: string, caller: string): { ms: number; partition?: Partition } {
    const at = this.now();
    let wait: { ms: number; partition?: Partition } = { ms: 0 };
    for (const p of this.relevant(opId, caller)) {
      if (at >= p.resetAt) {
        p.remaining = p.quota;
        continue;
      }
      if (p.remaining > reserveOf(p.quota)) continue;
      const ms = p.resetAt - at + 250;
      if (ms > wait.ms) wait = { ms, partition: p };
    }
    return wait;
  }

  /** After waiting out a partition's window: a new one starts with the whole quota. */
  renewed(p: Partition): void {
    p.remaining = p.quota;
  }

  /** A partition of this operation alone whose window outlasts what a run may wait: its requests are spent sparingly. */
  scarce(opId: string, longestWaitMs: number): Partition | undefined {
    return [...this.partitions.values()].find((p) => p.ops.has(opId) && p.ops.size === 1 && p.windowSeconds * 1000 > longestWaitMs);
  }

  /** The partition every request counts against (the client address), when one is known. */
  shared(): Partition | undefined {
    return [...this.partitions.values()]
      .filter((p) => p.ops.size >= 2 && p.callers.size >= 2)
      .sort((a, b) => b.callers.size - a.callers.size || b.ops.size - a.ops.size)[0];
  }

  all(): Partition[] {
    return [...this.partitions.values()];
  }
}

/** What the suite reads of the spec's `info.x-limits` (the defaults of every limit it states): those no header carries. */
export interface StatedLimits {
  bodyBytes?: number;
  failedLoginsPerAccount?: number;
  failedLoginsPerAddress?: number;
  failedLoginWindowSeconds?: number;
  activeKeysPerAccount?: number;
}

export function statedLimits(info: unknown): StatedLimits {
  const raw = (info as { 'x-limits'?: Record<string, unknown> } | undefined)?.['x-limits'] ?? {};
  const out: StatedLimits = {};
  for (const key of [
    'bodyBytes',
    'failedLoginsPerAccount',
    'failedLoginsPerAddress',
    'failedLoginWindowSeconds',
    'activeKeysPerAccount',
  ] as const) {
    const value = raw[key];
    if (typeof value === 'number' && Number.isInteger(value) && value > 0) out[key] = value;
  }
  return out;
}

/**
 * How many requests with password credentials that may be refused (each may count as a
 * failed login) one run sends: a third of the per-address lockout the spec states, so
 * that two more runs within its window still leave the address unlocked; 3 when it
 * states none.
 */
export function failedLoginBudget(limits: StatedLimits): number {
  return limits.failedLoginsPerAddress ? Math.max(1, Math.floor(limits.failedLoginsPerAddress / 3)) : 3;
}
