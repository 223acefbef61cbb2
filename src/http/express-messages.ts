// Requests and responses that Node builds on the app's own Express prototypes, so Express has none to swap.
import { IncomingMessage, ServerResponse } from 'node:http';
import type { Express } from 'express';

export interface ExpressMessageClasses {
  readonly IncomingMessage: typeof IncomingMessage;
  readonly ServerResponse: typeof ServerResponse;
}

/** One pair per app: a second server on the same app shares it (a second pair would undo the first's saving). */
const classesOfApp = new WeakMap<Express, ExpressMessageClasses>();

/**
 * The classes to give `http.createServer` for `app`. Express's `app.handle` moves every request and response onto the
 * app's prototypes (`Object.setPrototypeOf`, twice per request): what that cost is in bench/README.md, "Figures
 * behind code choices". Each class extends Node's own, and its prototype takes the place of the app's: the app's own
 * properties (`app`, getters set on it) copied over, the same parent (Express's, built on Node's), and `app.request` /
 * `app.response` pointing at it. Node then builds each message where Express would move it, and
 * `Object.setPrototypeOf` finds it there and does nothing. Call before sub-apps are mounted: one mounted before keeps
 * the old prototype as its parent, so what is defined on `app.request` afterwards does not reach it (the gateway mounts
 * none; one mounted after is re-parented by Express onto the new prototype).
 */
export function expressMessageClasses(app: Express): ExpressMessageClasses {
  const known = classesOfApp.get(app);
  // The same pair while the app's prototypes are still theirs (replaced since: a new pair stands in for the new ones).
  if (
    known &&
    known.IncomingMessage.prototype === app.request &&
    known.ServerResponse.prototype === app.response
  )
    return known;
  class ExpressRequest extends IncomingMessage {}
  class ExpressResponse<Request extends IncomingMessage = IncomingMessage> extends ServerResponse<Request> {}
  standIn(ExpressRequest.prototype, app.request);
  standIn(ExpressResponse.prototype, app.response);
  Object.assign(app, { request: ExpressRequest.prototype, response: ExpressResponse.prototype });
  const classes = { IncomingMessage: ExpressRequest, ServerResponse: ExpressResponse };
  classesOfApp.set(app, classes);
  return classes;
}

/**
 * `prototype` becomes what `appPrototype` is: its own properties, its parent. Not chained under it: Express re-parents
 * `app.request` when the app is mounted into another, which would cut the app's own prototype out of the chain.
 */
function standIn(prototype: object, appPrototype: object): void {
  // The class keeps its own `constructor` (a class prototype standing in for the app's would carry one).
  const { constructor: _ownConstructor, ...own } = Object.getOwnPropertyDescriptors(appPrototype);
  Object.defineProperties(prototype, own);
  Object.setPrototypeOf(prototype, Object.getPrototypeOf(appPrototype));
}
