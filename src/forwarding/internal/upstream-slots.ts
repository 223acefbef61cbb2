// A bounded wait for an upstream socket: at most `limit` calls run at once, the rest wait in line for at most
// `queueTimeoutMs`, and a caller who hangs up leaves the line. Nothing waits on the agent's own unbounded queue.
import type { Response } from 'express';
import { GatewayError, secondsToRetry } from '../../http/gateway-error';

/** Every upstream socket stayed busy for the whole queue timeout: answered 503 at once, never sent upstream. */
export class UpstreamSaturatedError extends GatewayError {
  constructor(retryAfterSeconds: number) {
    super('UPSTREAM_SATURATED', 'Every upstream connection is busy; try again shortly.', {
      status: 503,
      headers: { 'retry-after': String(retryAfterSeconds) },
    });
  }
}

/** The caller hung up before its call could start (in line, or before); nothing was sent and nobody reads the answer. */
export class CallerLeftQueueError extends GatewayError {
  constructor() {
    super('UPSTREAM_SATURATED', 'The caller hung up while waiting for an upstream connection.', {
      status: 503,
    });
  }
}

export interface UpstreamSlots {
  /** Runs `call` holding a slot, after waiting in line for one when every slot is taken. */
  run<T>(res: Response, call: () => Promise<T>): Promise<T>;
  /** Calls holding a slot. */
  readonly active: number;
  /** Calls waiting in line for one. */
  readonly waiting: number;
}

interface Waiter {
  readonly grant: () => void;
}

export function createUpstreamSlots(options: { limit: number; queueTimeoutMs: number }): UpstreamSlots {
  const retryAfter = secondsToRetry(options.queueTimeoutMs);
  // An array, not a Set or Map: it is only touched under saturation, and leaving it mid-line is rare.
  const line: Waiter[] = [];
  let active = 0;

  const release = () => {
    const next = line.shift();
    if (next)
      next.grant(); // the slot passes straight on: `active` stays
    else active -= 1;
  };

  const enterLine = (res: Response) =>
    new Promise<void>((resolve, reject) => {
      if (res.destroyed || res.writableEnded) {
        reject(new CallerLeftQueueError());
        return;
      }
      const leave = (error: GatewayError) => {
        clearTimeout(timer);
        res.off('close', onClose);
        const at = line.indexOf(waiter);
        if (at >= 0) line.splice(at, 1);
        reject(error);
      };
      const onClose = () => leave(new CallerLeftQueueError());
      const timer = setTimeout(() => leave(new UpstreamSaturatedError(retryAfter)), options.queueTimeoutMs);
      const waiter: Waiter = {
        grant() {
          clearTimeout(timer);
          res.off('close', onClose);
          resolve();
        },
      };
      res.once('close', onClose);
      line.push(waiter);
    });

  /** Runs `call` on a slot already taken, and gives the slot back when it settles or throws before it could. */
  const holding = <T>(call: () => Promise<T>): Promise<T> => {
    let running: Promise<T>;
    try {
      running = call();
    } catch (error) {
      release();
      return Promise.reject(error);
    }
    return running.then(releaseWith, releaseOnError);
  };
  // Built once: a call's slot comes back in one reaction, without a closure or the extra promise of `finally`.
  const releaseWith = <T>(value: T): T => {
    release();
    return value;
  };
  const releaseOnError = (error: unknown): never => {
    release();
    throw error;
  };

  return {
    run(res, call) {
      // A caller already gone starts no call (a token fetch or the 401's renewal outlasted it, the drain cut it): the
      // provider would answer nobody, and at shutdown the call could outlive the settle and miss the usage ledger.
      if (res.destroyed) return Promise.reject(new CallerLeftQueueError());
      if (active < options.limit) {
        active += 1;
        return holding(call);
      }
      if (options.queueTimeoutMs === 0) return Promise.reject(new UpstreamSaturatedError(retryAfter));
      return enterLine(res).then(() => holding(call));
    },
    get active() {
      return active;
    },
    get waiting() {
      return line.length;
    },
  };
}
