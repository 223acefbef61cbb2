// What the gateway's middleware attaches to Express requests.
import type { Logger } from 'pino';
import type { Caller } from '../callers/caller';

declare global {
  namespace Express {
    interface Request {
      /** The X-Request-Id of this exchange (kept from the caller when well-formed, else generated). */
      id: string;
      log: Logger;
      caller?: Caller;
    }
  }
}
