// What the pipeline attaches to a request: the validator's match (`openapi`) and the
// caller found by the security handlers (`principal`).
import type { Principal } from '../domain/types';
import type { ApiError } from './errors';

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      openapi?: {
        openApiRoute: string;
        /** The path parameters, coerced to their schema types by the request validator. */
        pathParams: Record<string, string>;
        schema: Record<string, unknown> & { operationId?: string; security?: Array<Record<string, unknown>> };
      };
      principal?: Principal;
      /** Why authentication failed, as the security handler decided it. */
      authError?: ApiError;
    }
  }
}
