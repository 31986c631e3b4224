// Stoplight Prism in proxy mode in front of the service: an outside validator, written by
// people other than this project's authors, checks every answer against the same
// openapi.yaml. It forwards each request unchanged and lists what it found wrong in an
// `sl-violations` header; the suite fails on any violation located in the response.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { HttpClient, type ReceivedResponse, type SentRequest } from '../contract/http';
import { freePort } from './contract-local';

const prismCli = join(__dirname, '..', 'node_modules', '@stoplight', 'prism-cli', 'dist', 'index.js');

export interface PrismProxy {
  baseUrl: string;
  output(): string;
  stop(): Promise<void>;
}

export async function startPrism(specPath: string, upstream: string): Promise<PrismProxy> {
  const port = await freePort();
  let output = '';
  const child: ChildProcess = spawn(
    process.execPath,
    [prismCli, 'proxy', specPath, upstream, '--host', '127.0.0.1', '--port', String(port), '--errors=false'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => void stop().then(() => reject(new Error(`Prism did not start within 60 s:\n${output}`))), 60_000);
    const listen = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      if (/Prism is listening/.test(output)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on('data', listen);
    child.stderr?.on('data', listen);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`Prism exited with ${code}:\n${output}`));
    });
  });
  // Its per-request log is not needed once it listens: the violations come in headers.
  const keep = (chunk: Buffer) => void (output = (output + chunk.toString('utf8')).slice(-20_000));
  child.stdout?.removeAllListeners('data').on('data', keep);
  child.stderr?.removeAllListeners('data').on('data', keep);
  return { baseUrl: `http://127.0.0.1:${port}`, output: () => output, stop };
}

interface Violation {
  location?: string[];
  severity?: string;
  code?: string | number;
  message?: string;
}

/** The violations Prism found in a response (not in the request, which the suite often breaks on purpose). */
export function responseViolations(headers: Record<string, string>): string[] {
  const raw = headers['sl-violations'];
  if (!raw) return [];
  let list: Violation[];
  try {
    list = JSON.parse(raw) as Violation[];
  } catch {
    return [`unreadable sl-violations header: ${raw.slice(0, 200)}`];
  }
  return list
    .filter((v) => v.location?.[0] === 'response')
    .map((v) => `${v.severity ?? 'Error'} at ${(v.location ?? []).join('.')}: ${v.message ?? String(v.code)}`);
}

/**
 * Prism parses a JSON body and forwards what it parsed: it never answers a body that
 * does not parse, and it drops a bare `null`. A path whose escapes are not UTF-8 (`%FF`)
 * throws out of its path matcher (URIError from uri-template-lite) and stops the proxy;
 * a request written byte for byte (a NUL in a header) is refused by its own HTTP server
 * and never reaches the service. So those of the suite's requests go straight to the
 * service (the suite checks those answers itself); everything else passes through Prism.
 */
export class PrismRoutedClient extends HttpClient {
  constructor(
    prismUrl: string,
    private readonly direct: HttpClient,
  ) {
    super(prismUrl);
  }

  override send(request: SentRequest): Promise<ReceivedResponse> {
    return !request.raw && decodes(request.path) && prismForwardsAsSent(request.body) ? super.send(request) : this.direct.send(request);
  }

  override close(): void {
    super.close();
    this.direct.close();
  }
}

function decodes(path: string): boolean {
  try {
    decodeURIComponent(path);
    return true;
  } catch {
    return false;
  }
}

function prismForwardsAsSent(body: string | undefined): boolean {
  if (body === undefined) return true;
  try {
    const parsed: unknown = JSON.parse(body);
    return typeof parsed === 'object' && parsed !== null;
  } catch {
    return false;
  }
}
