// Operations that are routed but not served yet. Later issues shrink this list to nothing.
import request from 'supertest';
import { handlers } from '../handlers';
import { isNotImplemented, notImplemented } from '../server/operations';
import { operationTable } from '../generated/operations';
import { expectError, setupApp } from './helpers';

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

  it('answer 501 not_implemented in the Error shape, through the same handler table', async () => {
    const t = setupApp({ handlers: { getHealth: notImplemented('getHealth') } });
    expectError(await request(t.app).get('/healthz'), 501, 'not_implemented');
  });
});
