// res.json for the service's answers: the body stringified once and written with its
// headers by one res.end. Express's own res.json goes through res.send, which parses
// the Content-Type again to add a charset, looks up ETag settings and the request's
// freshness, all settled here at start-up: the service sends no ETag on its JSON
// (app.ts) and answers no conditional request there. Installed on the app's own
// response prototype (app.response), so the response validator, which wraps res.json,
// checks the body before this writes it.
import type { Response } from 'express';

const jsonType = 'application/json; charset=utf-8';

/** Puts the sender on an Express app's response prototype (`app.response`), over Express's res.json. */
export function installJsonSender(response: Response): void {
  const expressJson = response.json;
  response.json = function sendJson(this: Response, body: unknown): Response {
    const text = JSON.stringify(body);
    // What res.send handles with more care goes to it: a type already set (its charset),
    // no body at all, statuses that carry none, a Transfer-Encoding set by someone.
    if (
      text === undefined ||
      this.getHeader('content-type') !== undefined ||
      this.getHeader('transfer-encoding') !== undefined ||
      this.statusCode === 204 ||
      this.statusCode === 205 ||
      this.statusCode === 304
    ) {
      return expressJson.call(this, body);
    }
    this.setHeader('Content-Type', jsonType);
    this.setHeader('Content-Length', Buffer.byteLength(text));
    // Node writes no body for a HEAD request (the response knows its request's method).
    this.end(text);
    return this;
  };
}
