// A bare HTTP client: the suite must send exactly the bytes and headers it means to
// (no body, a body on any method, a wrong Content-Type, a malformed Authorization),
// which fetch() does not allow, so it speaks node:http directly.
import http from 'node:http';
import https from 'node:https';

export interface SentRequest {
  method: string;
  /** Path and query, as sent. */
  path: string;
  headers: Record<string, string>;
  body?: string;
}

export interface ReceivedResponse {
  status: number;
  headers: Record<string, string>;
  text: string;
  /** The parsed body, when it parsed as JSON. */
  json?: unknown;
  durationMs: number;
}

export class HttpClient {
  private readonly agent: http.Agent;
  private readonly base: URL;

  constructor(
    baseUrl: string,
    private readonly timeoutMs = 15_000,
  ) {
    this.base = new URL(baseUrl);
    this.agent = this.base.protocol === 'https:' ? new https.Agent({ keepAlive: true }) : new http.Agent({ keepAlive: true });
  }

  /** The base URL's own path prefix, joined with a path of the spec. */
  url(path: string): URL {
    const prefix = this.base.pathname.replace(/\/$/, '');
    return new URL(prefix + path, this.base);
  }

  send(request: SentRequest): Promise<ReceivedResponse> {
    const url = this.url(request.path);
    const started = Date.now();
    const headers: Record<string, string> = { ...request.headers };
    const body = request.body === undefined ? undefined : Buffer.from(request.body, 'utf8');
    if (body) headers['Content-Length'] = String(body.length);
    const transport = url.protocol === 'https:' ? https : http;
    return new Promise((resolve, reject) => {
      const req = transport.request(url, { method: request.method, headers, agent: this.agent, timeout: this.timeoutMs }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const flat: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) flat[k] = Array.isArray(v) ? v.join(', ') : v;
          let json: unknown;
          try {
            json = text.length > 0 ? JSON.parse(text) : undefined;
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: flat, text, json, durationMs: Date.now() - started });
        });
      });
      req.on('timeout', () => req.destroy(new Error(`no answer within ${this.timeoutMs} ms`)));
      req.on('error', reject);
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
