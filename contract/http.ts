// A bare HTTP client: the suite must send exactly the bytes and headers it means to
// (no body, a body on any method, a wrong Content-Type, a malformed Authorization),
// which fetch() does not allow, so it speaks node:http directly.
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';

export interface SentRequest {
  method: string;
  /** Path and query, as sent. */
  path: string;
  headers: Record<string, string>;
  body?: string;
  /**
   * Written as it is, each header's text as latin1 bytes (a NUL included), on a connection
   * of its own: for the bytes node:http refuses to send.
   */
  raw?: boolean;
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
    if (request.raw) return this.sendRaw(request);
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

  /** One request on a connection of its own, read to its end; the server's answer is taken as HTTP/1.1 with a Content-Length or to the close. */
  private sendRaw(request: SentRequest): Promise<ReceivedResponse> {
    const url = this.url(request.path);
    const started = Date.now();
    const body = request.body === undefined ? undefined : Buffer.from(request.body, 'utf8');
    let head = `${request.method} ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nConnection: close\r\n`;
    for (const [name, value] of Object.entries(request.headers)) head += `${name}: ${value}\r\n`;
    if (body) head += `Content-Length: ${body.length}\r\n`;
    const bytes = Buffer.concat([Buffer.from(`${head}\r\n`, 'latin1'), body ?? Buffer.alloc(0)]);
    const port = Number(url.port) || (url.protocol === 'https:' ? 443 : 80);
    return new Promise((resolve, reject) => {
      const socket =
        url.protocol === 'https:'
          ? tls.connect({ host: url.hostname, port, servername: url.hostname })
          : net.connect({ host: url.hostname, port });
      const chunks: Buffer[] = [];
      socket.setTimeout(this.timeoutMs, () => socket.destroy(new Error(`no answer within ${this.timeoutMs} ms`)));
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('error', reject);
      socket.on('close', () => {
        const all = Buffer.concat(chunks);
        const end = all.indexOf('\r\n\r\n');
        const status = /^HTTP\/1\.[01] (\d{3})/.exec(all.toString('latin1'))?.[1];
        if (end < 0 || !status) return reject(new Error(`no HTTP answer: ${JSON.stringify(all.toString('latin1').slice(0, 80))}`));
        const headers: Record<string, string> = {};
        for (const line of all.subarray(0, end).toString('latin1').split('\r\n').slice(1)) {
          const colon = line.indexOf(':');
          const name = line.slice(0, colon).trim().toLowerCase();
          if (colon > 0) headers[name] = headers[name] ? `${headers[name]}, ${line.slice(colon + 1).trim()}` : line.slice(colon + 1).trim();
        }
        const length = headers['content-length'] === undefined ? undefined : Number(headers['content-length']);
        const text = all.subarray(end + 4, length === undefined ? undefined : end + 4 + length).toString('utf8');
        let json: unknown;
        try {
          json = text.length > 0 ? JSON.parse(text) : undefined;
        } catch {
          json = undefined;
        }
        resolve({ status: Number(status), headers, text, json, durationMs: Date.now() - started });
      });
      socket.write(bytes);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
