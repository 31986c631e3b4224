// What the pipeline attaches to a request: the route (`specPath`, `operation`), the
// validator's match (`openapi`), the caller found by the security handlers (`principal`)
// and, when tracing, its span's ids.
import type { Principal } from '../../domain/types';
import type { ApiError } from '../../domain/errors';
import type { Credentials } from '../security/auth';
import type { Operation, SpecPath } from './path-table';

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** Its X-Request-Id (server/pipeline/request-id.ts). */
      id?: string;
      /** The spec's path the request path is, when it is one (server/app.ts, route). */
      specPath?: SpecPath;
      /** The operation its method names on that path. */
      operation?: Operation;
      /** The spec path, for express-openapi-validator's match (patches/). */
      openApiRouteHint?: string;
      /** The raw values of the path template's parameters, in template order. */
      pathValues?: string[];
      openapi?: {
        openApiRoute: string;
        /** The path parameters, coerced to their schema types by the request validator. */
        pathParams: Record<string, string>;
        schema: Record<string, unknown> & { operationId?: string; security?: Array<Record<string, unknown>> };
      };
      /** Its Authorization header, parsed once (server/security/auth.ts, credentialsOf). */
      credentials?: Credentials;
      principal?: Principal;
      /** Why authentication failed, as the security handler decided it. */
      authError?: ApiError;
      /** The request's server span (server/observability/tracing.ts), for its access line. */
      trace?: { traceId: string; spanId: string };
    }
  }
}
