// Answers that close their connection, and the requests pipelined behind them on the same socket: Node never writes
// those requests' answers (the socket closes after the first), so the gateway never runs them either.
import type { Socket } from 'node:net';

const CLOSES = Symbol('closesAfterAnswer');
type Marked = Socket & { [CLOSES]?: true };

/** The answer being made on `socket` closes the connection: any request read behind it is dropped. */
export function markClosing(socket: Socket | null): void {
  if (socket) (socket as Marked)[CLOSES] = true;
}

/**
 * Whether an earlier answer on `socket` closes it: a request pipelined behind that answer will never get its own,
 * and running it would still authenticate, spend limits and quota, and call the provider for nothing.
 */
export function closesAfterAnswer(socket: Socket): boolean {
  return (socket as Marked)[CLOSES] === true;
}
