// Every answer the simulator gave on the two operations: whose token it carried, the gateway's X-Request-Id and the
// status. What "the provider's own count" is when a test reconciles the gateway's usage ledger with the provider.
import type { Request, Response } from 'express';

export interface OperationAnswer {
  readonly operation: 'validation' | 'plan';
  /** The merchant account (username) whose token the call carried; absent without a readable token. */
  readonly account?: string;
  /** The X-Request-Id the call carried, when it carried one. */
  readonly requestId?: string;
  readonly status: number;
}

export interface AnswerLog {
  /** Records the answer once it is sent; a call whose connection was cut (no answer) is not recorded. */
  watch(req: Request, res: Response, account: string | undefined): void;
  list(): OperationAnswer[];
  clear(): void;
}

/** Bounded: the oldest answers go first beyond this many. */
export const ANSWER_LOG_CAPACITY = 100_000;

export function createAnswerLog(capacity = ANSWER_LOG_CAPACITY): AnswerLog {
  let entries: OperationAnswer[] = [];
  return {
    watch(req, res, account) {
      const operation = req.path.startsWith('/api/subscriptions/plan/') ? 'plan' : 'validation';
      const header = req.headers['x-request-id'];
      const requestId = typeof header === 'string' ? header : undefined;
      res.once('finish', () => {
        entries.push({
          operation,
          ...(account !== undefined && { account }),
          ...(requestId !== undefined && { requestId }),
          status: res.statusCode,
        });
        if (entries.length > capacity) entries = entries.slice(-Math.floor(capacity / 2));
      });
    },
    list: () => entries.slice(),
    clear() {
      entries = [];
    },
  };
}
