// The optional quota webhook (QUOTA_WEBHOOK_URL): each threshold event POSTed as JSON with an HMAC signature,
// retried with back-off, from a bounded queue that a request never waits on.
import { hmacSha256Hex } from '../../keys/hash';

export interface QuotaWebhookOptions {
  readonly url: string;
  /** The HMAC key (QUOTA_WEBHOOK_SECRET); never sent, never logged. */
  readonly secret: string;
  readonly maxQueue?: number;
  readonly maxAttempts?: number;
  readonly firstRetryMs?: number;
  readonly timeoutMs?: number;
  readonly now?: () => number;
  /** delivered, retried (one failed attempt), dropped (queue full, attempts spent, or stopped). */
  readonly onResult?: (result: 'delivered' | 'retried' | 'dropped', detail?: string) => void;
}

interface Delivery {
  readonly body: string;
  attempts: number;
}

/** The receiver checks `X-Gateway-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`. */
export function signatureHeader(secret: string, body: string, unixSeconds: number): string {
  return `t=${unixSeconds},v1=${hmacSha256Hex(secret, `${unixSeconds}.${body}`)}`;
}

export class QuotaWebhook {
  private readonly queue: Delivery[] = [];
  private running = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly abort = new AbortController();

  constructor(private readonly options: QuotaWebhookOptions) {}

  /** Queues one event; returns at once. A full queue drops the event (counted), never blocks. */
  send(event: Record<string, unknown>): void {
    if (this.stopped || this.queue.length >= (this.options.maxQueue ?? 100)) {
      this.options.onResult?.('dropped', 'queue full');
      return;
    }
    this.queue.push({ body: JSON.stringify(event), attempts: 0 });
    // On a later turn: the caller (a request's settle) never pays for a call, not even its synchronous start.
    if (!this.running && !this.timer) {
      this.running = true;
      setImmediate(() => void this.drain());
    }
  }

  /** Stops retries and aborts a call in flight; what is still queued is dropped (counted). */
  close(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.abort.abort();
    for (const _ of this.queue.splice(0)) this.options.onResult?.('dropped', 'stopped');
  }

  private async drain(): Promise<void> {
    this.running = true;
    try {
      while (!this.stopped && this.queue.length > 0) {
        const delivery = this.queue[0] as Delivery;
        const error = await this.post(delivery.body);
        if (error === undefined) {
          this.queue.shift();
          this.options.onResult?.('delivered');
          continue;
        }
        delivery.attempts += 1;
        if (delivery.attempts >= (this.options.maxAttempts ?? 6)) {
          this.queue.shift();
          this.options.onResult?.('dropped', error);
          continue;
        }
        this.options.onResult?.('retried', error);
        const delay = (this.options.firstRetryMs ?? 1000) * 2 ** (delivery.attempts - 1);
        this.timer = setTimeout(
          () => {
            this.timer = undefined;
            void this.drain();
          },
          delay * (0.5 + Math.random() / 2),
        );
        this.timer.unref();
        return;
      }
    } finally {
      this.running = false;
    }
  }

  /** undefined when delivered (2xx); otherwise why not, without the URL (it may hold a token). */
  private async post(body: string): Promise<string | undefined> {
    const unixSeconds = Math.floor((this.options.now ?? Date.now)() / 1000);
    const timeout = AbortSignal.timeout(this.options.timeoutMs ?? 5000);
    try {
      const response = await fetch(this.options.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-gateway-signature': signatureHeader(this.options.secret, body, unixSeconds),
        },
        body,
        signal: AbortSignal.any([timeout, this.abort.signal]),
        redirect: 'error',
      });
      await response.body?.cancel().catch(() => undefined);
      return response.ok ? undefined : `status ${response.status}`;
    } catch (error) {
      return (error as Error).name === 'TimeoutError' ? 'timeout' : 'unreachable';
    }
  }
}
