// Answers for operations that are in openapi.yaml but not implemented yet, made from the
// spec itself (MOCK_UNIMPLEMENTED, for development): the handler a stub would run is
// replaced by one of these at start-up, so the request has gone through the operation's
// whole chain first (route, limits, 401, 403, input 400), and the response validator
// checks the answer as any other. Implemented operations never meet this code.
//
// The answer is the example of the operation's first 2xx response (the first of its named
// examples), else a value made from its schema by openapi-sampler (deterministic: the
// schema's enums, formats, bounds and `example`s). `Prefer: code=404` and
// `Prefer: example=NAME` choose another, as with Stoplight Prism; an Error from a response
// several operations share gets a message naming this one. Every answer is made and
// checked against its schema here, once, at start-up: one that does not fit stops start-up.
// A preference the operation cannot meet is its 501, a designed answer: logged at `info`.
import type { Request, RequestHandler } from 'express';
import { sample } from 'openapi-sampler';
import { ApiError } from '../../domain/errors';
import type { OpenApiDocument } from '../spec';
import { StartupError } from '../startup';
import { describeErrors, schemaChecks } from './schemas';

type Node = Record<string, unknown>;
type Media = { schema?: Node; example?: unknown; examples?: Record<string, { value?: unknown }> };
type ResponseSpec = { content?: Record<string, Media>; headers?: Record<string, { example?: unknown; schema?: Node }> };

/** One answer the mock may give: its status, body, the `X-Mock` value saying where it came from. */
interface Answer {
  status: number;
  /** `example`, `example=NAME`, `schema`, or `empty` (a response without a body). */
  source: string;
  body?: unknown;
  /** The `Location` the spec gives as an example, or true: made from the request path and the body's `id`. */
  location?: string | true;
}

/** What a response of the operation can answer: its example (or made body) first, then each named example. */
interface Answers {
  first: Answer;
  named: Map<string, Answer>;
}

/** The mock's handler for one operation, made (and every answer checked) at start-up. */
export type MockAnswers = (id: string, method: string, path: string) => RequestHandler;

/** `doc` is the document served, with its references inlined (server/spec.ts `dereferenced`). */
export function createMock(doc: OpenApiDocument): MockAnswers {
  const checks = schemaChecks(doc);
  const errorSchema = ((doc.components as Node | undefined)?.schemas as Node | undefined)?.Error;
  // The responses several operations name (`$ref: '#/components/responses/NotFound'`): the
  // inlined document keeps one object for each, so an operation's response is shared when
  // it is one of these. Their examples speak of some operation ("Pet 42 was not found").
  const shared = new Set(Object.values(((doc.components as Node | undefined)?.responses ?? {}) as Node));

  return (id, method, path) => {
    const where = `${id} (${method.toUpperCase()} ${path})`;
    const responses = (doc.paths[path]?.[method]?.responses ?? {}) as Record<string, ResponseSpec>;
    // The statuses written out (this contract writes no `default` nor `2XX`).
    const statuses = Object.keys(responses).filter((s) => /^[1-5]\d\d$/.test(s));
    const success = statuses.filter((s) => s.startsWith('2')).sort()[0];
    if (!success) throw new StartupError(`MOCK_UNIMPLEMENTED: ${where} documents no 2xx response to answer with`);

    const answersOf = new Map(statuses.map((status) => [status, answers(where, Number(status), responses[status] as ResponseSpec)]));
    const documented = statuses.join(', ');
    const fallback = answersOf.get(success) as Answers;

    const choose = (req: Request): Answer => {
      const prefer = preferences(req.headers.prefer);
      if (prefer.code === undefined && prefer.example === undefined) return fallback.first;
      let chosen = fallback;
      if (prefer.code !== undefined) {
        const code = prefer.code;
        const found = answersOf.get(code);
        if (!found)
          throw new ApiError(
            'not_implemented',
            `${id} is not implemented yet, and has no ${code} answer to mock (Prefer: code=${code}): it documents ${documented}`,
            501,
          );
        chosen = found;
      }
      if (prefer.example === undefined) return chosen.first;
      const named = chosen.named.get(prefer.example);
      if (!named) {
        const names = [...chosen.named.keys()];
        throw new ApiError(
          'not_implemented',
          `${id} is not implemented yet, and its ${chosen.first.status} answer has no example named ${prefer.example} (Prefer: example=${prefer.example}): ` +
            (names.length > 0 ? `it has ${names.join(', ')}` : 'it has no named examples'),
          501,
        );
      }
      return named;
    };

    return (req, res) => {
      const answer = choose(req);
      res.setHeader('X-Mock', answer.source);
      if (answer.location !== undefined) res.setHeader('Location', locationOf(answer, req.path));
      res.status(answer.status);
      if (answer.body === undefined) res.end();
      else res.json(answer.body);
    };
  };

  /** Every answer one response can give, each checked against its schema. */
  function answers(where: string, status: number, response: ResponseSpec): Answers {
    const header = Object.entries(response.headers ?? {}).find(([name]) => name.toLowerCase() === 'location')?.[1];
    const given = header?.example ?? header?.schema?.example;
    const location = header ? (typeof given === 'string' ? given : true) : undefined;
    const content = response.content ?? {};
    const media = content['application/json'];
    if (!media) {
      if (Object.keys(content).length > 0)
        throw new StartupError(`MOCK_UNIMPLEMENTED: ${where} ${status}: only application/json answers are mocked`);
      return { first: { status, source: 'empty', location }, named: new Map() };
    }
    const schema = media.schema ?? {};
    const check = checks.response(schema);
    const fits = (answer: Answer): Answer => {
      if (!check(structuredClone(answer.body)))
        throw new StartupError(
          `MOCK_UNIMPLEMENTED: ${where} ${status} (${answer.source}) does not fit its schema: ${describeErrors(check)}; give the response an example that fits`,
        );
      return answer;
    };
    // A shared response's example is another operation's words: an Error keeps its code
    // and says which operation's mock it is; any other body is made from the schema.
    const own = (body: unknown): unknown => {
      if (!shared.has(response)) return body;
      if (schema !== errorSchema) return undefined;
      const code = (body as { code?: unknown } | null)?.code;
      return { code, message: `A mock ${status} ${String(code)} of ${where}`, status };
    };
    const named = new Map(
      Object.entries(media.examples ?? {})
        .filter(([, e]) => own(e.value) !== undefined)
        .map(([name, e]) => [name, fits({ status, source: `example=${name}`, body: own(e.value), location })]),
    );
    const example = media.example === undefined ? undefined : own(media.example);
    let first: Answer | undefined = example !== undefined ? { status, source: 'example', body: example, location } : undefined;
    first ??= named.values().next().value;
    if (!first) {
      const made = sample(schema, { skipWriteOnly: true, enablePatterns: true, quiet: true });
      // An Error made from its schema says the answer's status, as every Error does.
      if (schema === errorSchema && made && typeof made === 'object')
        Object.assign(made, { status, message: `A mock ${status}: openapi.yaml gives no example for it` });
      first = { status, source: 'schema', body: made, location };
    }
    return { first: fits(first), named };
  }
}

/** `Prefer: code=404, example=notFound` (RFC 7240): the two preferences the mock honours; others are ignored. */
function preferences(header: string | string[] | undefined): { code?: string; example?: string } {
  const found: { code?: string; example?: string } = {};
  for (const part of [header ?? ''].flat().join(',').split(',')) {
    const token = part.split(';')[0] ?? '';
    const at = token.indexOf('=');
    if (at < 0) continue;
    const name = token.slice(0, at).trim().toLowerCase();
    const value = token
      .slice(at + 1)
      .trim()
      .replace(/^"(.*)"$/, '$1');
    if ((name === 'code' || name === 'example') && found[name] === undefined) found[name] = value;
  }
  return found;
}

/** The spec's example, or where a created resource would be: the request path and the body's `id`. */
function locationOf(answer: Answer, path: string): string {
  if (typeof answer.location === 'string') return answer.location;
  const id = (answer.body as { id?: unknown } | undefined)?.id;
  return typeof id === 'string' || typeof id === 'number' ? `${path}/${encodeURIComponent(String(id))}` : path;
}
