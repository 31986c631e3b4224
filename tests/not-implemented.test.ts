// Operations that are routed but not served yet: none any more. The list stays pinned
// (empty), and every operation of the contract, as the spec lists them, is called with
// valid requests (the contract suite's) and must answer its documented success status,
// never 501.
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { ResponseValidator } from '../contract/checks';
import { HttpClient } from '../contract/http';
import { runSuite } from '../contract/runner';
import { loadContract } from '../contract/spec';
import { handlers } from '../handlers';
import { isNotImplemented, notImplemented } from '../handlers/types';
import { operationTable, type OperationId } from '../generated/operations';
import { checkSpec } from '../scripts/spec-check';
import { loadSpec } from '../server/spec';
import { admin, customer, expectError, setupApp } from './helpers';

const stillNotImplemented: string[] = [];

describe('operations not implemented yet', () => {
  it('are exactly the pinned list', () => {
    const actual = Object.entries(handlers)
      .filter(([, handler]) => isNotImplemented(handler))
      .map(([id]) => id);
    expect(actual.sort()).toEqual([...stillNotImplemented].sort());
  });

  it('every operation of the spec has a handler and every handler an operation', () => {
    expect(Object.keys(handlers).sort()).toEqual(Object.keys(operationTable).sort());
  });

  it('a document that is not valid OpenAPI is refused by `npm run generate`, naming where', () => {
    const spec = loadSpec();
    expect(() => checkSpec(spec)).not.toThrow();
    (spec.paths['/pets'] as Record<string, Record<string, unknown>>).get!.responses = 'none';
    expect(() => checkSpec(spec)).toThrow(/is not valid OpenAPI 3\.\d\.\d:\n {2}\/paths\/~1pets\/get\/responses: must be object/);
  });

  it('a handler whose operation left the spec stops start-up, named', () => {
    const spec = loadSpec();
    delete (spec.paths['/healthz'] as Record<string, unknown>).get;
    expect(() => setupApp({ spec })).toThrow('Handlers with no operation in openapi.yaml: getHealth. Delete them');
  });

  it('an operation of the spec without a handler stops start-up, named', () => {
    const spec = loadSpec();
    (spec.paths['/healthz'] as Record<string, unknown>).post = {
      operationId: 'pokeHealth',
      tags: ['service'],
      responses: { '204': { description: 'Poked.' } },
    };
    expect(() => setupApp({ spec })).toThrow('Operation pokeHealth (POST /healthz) has no matching handler: run `npm run generate`');
  });

  it('answer 501 not_implemented in the Error shape, through the same handler table', async () => {
    const t = setupApp({ handlers: { getHealth: notImplemented('getHealth') } });
    expectError(await request(t.app).get('/healthz'), 501, 'not_implemented');
  });
});

describe('every operation of the contract', () => {
  const spec = loadSpec();
  /** The one 2xx status the spec documents for the operation. */
  const successOf = (id: OperationId): number => {
    const { method, path } = operationTable[id];
    const responses = (spec.paths[path]?.[method] as { responses: Record<string, unknown> }).responses;
    const statuses = Object.keys(responses).filter((s) => s.startsWith('2'));
    if (statuses.length !== 1) throw new Error(`${id} documents ${statuses.length} success statuses`);
    return Number(statuses[0]);
  };

  // The operations and their valid requests come from the spec, through the contract
  // suite's generator and chaining: an operation added to openapi.yaml is called here
  // without a line written for it.
  it('answers a valid request with its documented success status', async () => {
    const t = setupApp();
    const contract = loadContract();
    const server = t.app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    const client = new HttpClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    try {
      const result = await runSuite({
        client,
        contract,
        validator: new ResponseValidator(contract),
        seed: 11,
        runs: 1,
        customerKey: (await customer(t.app)).key,
        adminKey: (await admin(t)).key,
        bodyLimitBytes: 65536,
        rateLimitReason: 'not probed in this test',
      });
      expect(contract.operations.map((op) => op.id).sort()).toEqual(Object.keys(operationTable).sort());
      const answered = (id: string) =>
        new Set(result.exchanges.filter((e) => e.opId === id && e.expect.kind === 'valid').map((e) => e.response.status));
      for (const id of Object.keys(operationTable) as OperationId[]) {
        expect({ id, success: answered(id).has(successOf(id)) }).toEqual({ id, success: true });
      }
      expect(result.exchanges.filter((e) => e.response.status === 501).map((e) => e.opId)).toEqual([]);
    } finally {
      client.close();
      server.close();
    }
  }, 180_000);
});
