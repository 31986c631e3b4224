import { randomUUID } from 'node:crypto';
import type { Request, Response } from 'express';

/** The longest X-Request-Id a client may give (openapi.yaml, info: x-limits.requestIdLength). */
export const maxRequestIdLength = 128;
const sane = new RegExp(`^[A-Za-z0-9._:-]{1,${maxRequestIdLength}}$`);

/** Echoes the client's X-Request-Id when it is sane, otherwise makes one. */
export const requestId = (req: Request, res: Response): void => {
  const given = req.headers['x-request-id'];
  const id = typeof given === 'string' && sane.test(given) ? given : randomUUID();
  req.id = id;
  res.setHeader('X-Request-Id', id);
};
