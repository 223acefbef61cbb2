// Requests and responses that Node builds on the app's own Express prototypes, so Express has none to swap.
import { IncomingMessage, ServerResponse } from 'node:http';
import type { Express } from 'express';

export interface ExpressMessageClasses {
  readonly IncomingMessage: typeof IncomingMessage;
  readonly ServerResponse: typeof ServerResponse;
}

/**
 * The classes to give `http.createServer` for `app`. Express's `app.handle` moves every request and response onto the
 * app's prototypes (`Object.setPrototypeOf`, twice per request), which costs ~3 µs per request in the bench's
 * profile, more than the rest of Express and its router together (bench/README.md, "Figures behind code choices").
 * Each class here extends Node's own and inherits from the app's prototype (itself built on Express's, built on
 * Node's), and the app's prototype becomes the class's: Node then builds each message where Express would move it,
 * and `Object.setPrototypeOf` finds it there and does nothing. Call once, before the app serves.
 */
export function expressMessageClasses(app: Express): ExpressMessageClasses {
  class ExpressRequest extends IncomingMessage {}
  class ExpressResponse<Request extends IncomingMessage = IncomingMessage> extends ServerResponse<Request> {}
  Object.setPrototypeOf(ExpressRequest.prototype, app.request);
  Object.setPrototypeOf(ExpressResponse.prototype, app.response);
  Object.assign(app, { request: ExpressRequest.prototype, response: ExpressResponse.prototype });
  return { IncomingMessage: ExpressRequest, ServerResponse: ExpressResponse };
}
