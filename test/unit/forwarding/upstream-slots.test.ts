// The bounded wait for an upstream socket, on its own: order, timeout, hang-up, and the slot passed on.
import { EventEmitter } from 'node:events';
import type { Response } from 'express';
import {
  CallerLeftQueueError,
  createUpstreamSlots,
  UpstreamSaturatedError,
} from '../../../src/forwarding/internal/upstream-slots';

/** The parts of a response the slots read: its close event and whether it already ended. */
function caller(): Response & { hangUp(): void } {
  const res = Object.assign(new EventEmitter(), { destroyed: false, writableEnded: false });
  return Object.assign(res, {
    hangUp() {
      res.destroyed = true;
      res.emit('close');
    },
  }) as unknown as Response & { hangUp(): void };
}

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

afterEach(() => jest.useRealTimers());

it('runs up to the limit at once and hands each freed slot to the longest waiter', async () => {
  const slots = createUpstreamSlots({ limit: 2, queueTimeoutMs: 60_000 });
  const gates = [deferred(), deferred()];
  const started: string[] = [];
  const run = (name: string, gate?: Promise<void>) =>
    slots.run(caller(), async () => {
      started.push(name);
      await gate;
      return name;
    });
  const a = run('a', gates[0]?.promise);
  const b = run('b', gates[1]?.promise);
  const c = run('c');
  const d = run('d');
  expect([slots.active, slots.waiting]).toEqual([2, 2]);
  gates[1]?.resolve();
  expect(await Promise.all([b, c, d])).toEqual(['b', 'c', 'd']);
  expect(started).toEqual(['a', 'b', 'c', 'd']);
  gates[0]?.resolve();
  await a;
  expect([slots.active, slots.waiting]).toEqual([0, 0]);
});

it('rejects a waiter with UPSTREAM_SATURATED (503, Retry-After) at the queue timeout, and never runs it', async () => {
  jest.useFakeTimers();
  const slots = createUpstreamSlots({ limit: 1, queueTimeoutMs: 1_500 });
  const busy = deferred();
  void slots.run(caller(), () => busy.promise);
  const call = jest.fn(async () => 'never');
  const waiting = slots.run(caller(), call);
  jest.advanceTimersByTime(1_500);
  const error = await waiting.catch((e: unknown) => e);
  expect(error).toBeInstanceOf(UpstreamSaturatedError);
  expect(error).toMatchObject({ reason: 'UPSTREAM_SATURATED', status: 503, headers: { 'retry-after': '2' } });
  expect(slots.waiting).toBe(0);
  busy.resolve();
  await Promise.resolve();
  expect(call).not.toHaveBeenCalled();
});

it('drops a waiter whose caller hangs up, and one who had hung up before arriving', async () => {
  const slots = createUpstreamSlots({ limit: 1, queueTimeoutMs: 60_000 });
  const busy = deferred();
  const holding = slots.run(caller(), () => busy.promise);
  const leaving = caller();
  const call = jest.fn(async () => undefined);
  const waiting = slots.run(leaving, call);
  leaving.hangUp();
  await expect(waiting).rejects.toBeInstanceOf(CallerLeftQueueError);
  const gone = caller();
  gone.hangUp();
  await expect(slots.run(gone, call)).rejects.toBeInstanceOf(CallerLeftQueueError);
  expect(slots.waiting).toBe(0);
  busy.resolve();
  await holding;
  expect(call).not.toHaveBeenCalled();
  expect(slots.active).toBe(0);
});

it('with a zero queue timeout answers UPSTREAM_SATURATED at once when every slot is taken', async () => {
  const slots = createUpstreamSlots({ limit: 1, queueTimeoutMs: 0 });
  const busy = deferred();
  void slots.run(caller(), () => busy.promise);
  await expect(slots.run(caller(), async () => 'x')).rejects.toBeInstanceOf(UpstreamSaturatedError);
  busy.resolve();
});

it('frees the slot when the call fails', async () => {
  const slots = createUpstreamSlots({ limit: 1, queueTimeoutMs: 60_000 });
  await expect(slots.run(caller(), async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
  expect(slots.active).toBe(0);
  expect(await slots.run(caller(), async () => 'next')).toBe('next');
});

it('frees the slot when the call throws before it returns a promise, taken at once or after a wait', async () => {
  const slots = createUpstreamSlots({ limit: 1, queueTimeoutMs: 60_000 });
  const throwing = (): Promise<string> => {
    throw new Error('thrown');
  };
  await expect(slots.run(caller(), throwing)).rejects.toThrow('thrown');
  expect(slots.active).toBe(0);
  const first = deferred();
  const holder = slots.run(caller(), () => first.promise);
  const waiter = slots.run(caller(), throwing);
  first.resolve();
  await holder;
  await expect(waiter).rejects.toThrow('thrown');
  expect(slots.active).toBe(0);
  expect(await slots.run(caller(), async () => 'next')).toBe('next');
});

// A 401's renewal (or a slow token fetch) that outlasted its caller started the call anyway, for nobody; at shutdown
// that call outlived the settle after the drain, was cut, and the provider billed what the ledger did not count.
it('a caller already gone takes no free slot: nothing runs, the slot stays free', async () => {
  const slots = createUpstreamSlots({ limit: 1, queueTimeoutMs: 60_000 });
  const gone = caller();
  gone.hangUp();
  let ran = false;
  await expect(
    slots.run(gone, async () => {
      ran = true;
    }),
  ).rejects.toBeInstanceOf(CallerLeftQueueError);
  expect(ran).toBe(false);
  expect(slots.active).toBe(0);
  await expect(slots.run(caller(), async () => 'served')).resolves.toBe('served');
});
