// The idempotency rules of SPEC §13 over the in-process store, a fake clock and a forward the test controls, behind a
// real Express app with the gateway's error envelope (the replica fleet: test/system/idempotency.test.ts).
import { randomBytes } from 'node:crypto';
import express, { type Express } from 'express';
import request from 'supertest';
import type { Caller } from '../../../src/callers/caller';
import type { AccountForwarding } from '../../../src/forwarding';
import { sendAnswer } from '../../../src/forwarding';
import { errorEnvelopeHandler } from '../../../src/http/error-envelope';
import { GatewayError } from '../../../src/http/gateway-error';
import {
  createIdempotency,
  type IdempotencyPolicy,
  type IdempotencyStore,
  type KeptAnswer,
  memoryIdempotencyStore,
  repeatDecision,
} from '../../../src/idempotency';
import { createRecordSeal, createTokenCipher } from '../../../src/tokens';

const OPTIONAL: IdempotencyPolicy = { idempotency: 'optional', forwardIdempotencyKey: false };
const LEASE_MS = 10_000;
const BODY = { country: 'ARG', document: { id: '1', type: 'DNI' } };

type Forward = (upstreamKey: string | undefined, locals: Express.Locals) => Promise<KeptAnswer>;

function harness(
  options: {
    policy?: IdempotencyPolicy;
    store?: IdempotencyStore;
    ttlSeconds?: number;
    leaseMs?: number;
  } = {},
) {
  let now = 1_000_000;
  const outcomes: string[] = [];
  const commands: string[] = [];
  const inner = options.store ?? memoryIdempotencyStore(() => now);
  const store: IdempotencyStore = {
    claim(...args) {
      commands.push('claim');
      return inner.claim(...args);
    },
    keep(...args) {
      commands.push('keep');
      return inner.keep(...args);
    },
    release(...args) {
      commands.push('release');
      return inner.release(...args);
    },
  };
  const idempotency = createIdempotency({
    store,
    seal: createRecordSeal(createTokenCipher(randomBytes(32)), { inc: () => undefined }),
    keyPrefix: 'test:',
    ttlSeconds: options.ttlSeconds ?? 3600,
    leaseMsOf: () => options.leaseMs ?? LEASE_MS,
    count: (_operation, outcome) => outcomes.push(outcome),
    logger: { warn: () => undefined },
    now: () => now,
  });
  const calls: (string | undefined)[] = [];
  let forward: Forward = async () => ({
    status: 200,
    headers: { 'content-type': 'application/json' },
    body: Buffer.from(`{"code":"200","call":${calls.length}}`),
  });
  const app: Express = express();
  let ids = 0;
  app.use((req, res, next) => {
    req.id = `req-${++ids}`;
    res.setHeader('x-request-id', req.id);
    req.caller = { id: String(req.headers['x-client'] ?? 'app') } as Caller;
    req.account = { id: 'acct' } as AccountForwarding;
    next();
  });
  app.post('/op', express.json(), async (req, res, next) => {
    try {
      const answer = await idempotency.forward(
        req,
        res,
        {
          operation: 'validation',
          policy: options.policy ?? OPTIONAL,
          method: 'POST',
          path: '/op',
          body: req.body,
        },
        (key) => {
          calls.push(key);
          return forward(key, res.locals);
        },
      );
      sendAnswer(res, answer);
    } catch (error) {
      next(error);
    }
  });
  app.use(errorEnvelopeHandler());
  const post = (key?: string, body: object = BODY, client = 'app') => {
    const r = request(app).post('/op').set('x-client', client);
    if (key !== undefined) r.set('Idempotency-Key', key);
    return r.send(body);
  };
  return {
    app,
    post,
    calls,
    outcomes,
    commands,
    setForward: (f: Forward) => {
      forward = f;
    },
    advance: (ms: number) => {
      now += ms;
    },
  };
}

/** A forward that stays out until released: the first request in flight. */
function held() {
  let release!: () => void;
  let started!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const out = new Promise<void>((resolve) => {
    started = resolve;
  });
  const forward: Forward = async () => {
    started();
    await gate;
    return {
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: Buffer.from('{"late":true}'),
    };
  };
  return { forward, release, out };
}

describe('idempotent forwarding (SPEC §13)', () => {
  test('a request without a key is forwarded with no store command; a keyed one costs a claim and a keep', async () => {
    const h = harness();
    await h.post().expect(200);
    expect(h.commands).toEqual([]);
    await h.post('k1').expect(200);
    expect(h.commands).toEqual(['claim', 'keep']);
    expect(h.outcomes).toEqual(['claimed', 'kept']);
  });

  test('a repeat gets the kept answer byte for byte with Idempotent-Replayed: true, without a second call', async () => {
    const h = harness();
    const first = await h.post('k1').expect(200);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    for (let i = 0; i < 3; i++) {
      const again = await h.post('k1').expect(200);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.text).toBe(first.text);
      expect(again.headers['content-type']).toBe(first.headers['content-type']);
      expect(again.headers['x-request-id']).not.toBe(first.headers['x-request-id']);
    }
    expect(h.calls).toHaveLength(1);
    expect(h.outcomes.filter((o) => o === 'replayed')).toHaveLength(3);
    // A replay is one store call: the claim that finds the record (in Redis: SET NX, then GET).
    expect(h.commands).toEqual(['claim', 'keep', 'claim', 'claim', 'claim']);
  });

  test('the same body in another key order is the same request; another body is 422 IDEMPOTENCY_KEY_REUSED', async () => {
    const h = harness();
    await h.post('k1', { country: 'ARG', document: { id: '1', type: 'DNI' } }).expect(200);
    await h.post('k1', { document: { type: 'DNI', id: '1' }, country: 'ARG' }).expect(200);
    const reused = await h.post('k1', { country: 'ARG', document: { id: '2', type: 'DNI' } }).expect(422);
    expect(reused.body.status.description).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(h.calls).toHaveLength(1);
  });

  test('the same key from two clients: two executions', async () => {
    const h = harness();
    await h.post('k1', BODY, 'one').expect(200);
    await h.post('k1', BODY, 'two').expect(200);
    expect(h.calls).toHaveLength(2);
  });

  test('while the first is out: 409 IDEMPOTENCY_KEY_IN_USE with Retry-After (the lease left); then the replay', async () => {
    const h = harness();
    const slow = held();
    h.setForward(slow.forward);
    const first = h.post('k1').then((r) => r);
    await slow.out;
    h.advance(3_000);
    const busy = await h.post('k1').expect(409);
    expect(busy.body.status.description).toBe('IDEMPOTENCY_KEY_IN_USE');
    expect(busy.headers['retry-after']).toBe('7');
    // Another body while it is out: reuse, not "in use".
    await h.post('k1', { ...BODY, country: 'BRA' }).expect(422);
    slow.release();
    expect((await first).status).toBe(200);
    const replay = await h.post('k1').expect(200);
    expect(replay.text).toBe('{"late":true}');
    expect(h.calls).toHaveLength(1);
  });

  test('a claim whose lease ended without an answer (its replica died): 504 UPSTREAM_OUTCOME_UNKNOWN, never forwarded', async () => {
    const h = harness();
    const slow = held();
    h.setForward(slow.forward);
    void h.post('k1').then((r) => r);
    await slow.out;
    h.advance(LEASE_MS + 1);
    const unknown = await h.post('k1').expect(504);
    expect(unknown.body.status.description).toBe('UPSTREAM_OUTCOME_UNKNOWN');
    expect(h.calls).toHaveLength(1);
    slow.release();
  });

  test('a lease longer than IDEMPOTENCY_TTL_SECONDS: the claim outlives the TTL, a repeat is never forwarded', async () => {
    // IDEMPOTENCY_TTL_SECONDS=60 beside UPSTREAM_TIMEOUT_MS=60000: the lease (two attempts and the waits) is longer
    // than the TTL. The claim must stay until the lease ends, and then tell the unknown outcome.
    const h = harness({ ttlSeconds: 60, leaseMs: 130_000 });
    const slow = held();
    h.setForward(slow.forward);
    const first = h.post('k1').then((r) => r);
    await slow.out;
    h.advance(61_000);
    const busy = await h.post('k1').expect(409);
    expect(busy.body.status.description).toBe('IDEMPOTENCY_KEY_IN_USE');
    h.advance(70_000);
    await h.post('k1').expect(504);
    expect(h.calls).toHaveLength(1);
    slow.release();
    expect((await first).status).toBe(200);
  });

  test('a refusal before forwarding keeps nothing: the retry is forwarded', async () => {
    const h = harness();
    h.setForward(async () => {
      throw new GatewayError('UPSTREAM_BUDGET_EXHAUSTED', 'no room', { headers: { 'retry-after': '1' } });
    });
    await h.post('k1').expect(429);
    expect(h.outcomes).toEqual(['claimed', 'released']);
    h.setForward(async () => ({ status: 200, headers: {}, body: Buffer.from('{}') }));
    await h.post('k1').expect(200);
    expect(h.calls).toHaveLength(2);
  });

  test('a provider answer the gateway turned into an error (a 5xx: 502) is kept and replayed as sent', async () => {
    const h = harness();
    h.setForward(async (_key, locals) => {
      locals.upstreamAnswered = true;
      locals.upstreamStatus = 503;
      throw new GatewayError('UPSTREAM_UNAVAILABLE', 'The upstream could not be reached or failed.');
    });
    const first = await h.post('k1').expect(502);
    const again = await h.post('k1').expect(502);
    expect(again.text).toBe(first.text);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(h.calls).toHaveLength(1);
  });

  test('a provider refusal that executed nothing (429, 403, a second 401) is not kept: the retry is forwarded', async () => {
    const h = harness();
    h.setForward(async (_key, locals) => {
      locals.upstreamAnswered = true;
      return { status: 429, headers: { 'retry-after': '1' }, body: Buffer.from('{"detail":"slow down"}') };
    });
    await h.post('k1').expect(429);
    h.setForward(async (_key, locals) => {
      locals.upstreamAnswered = true;
      locals.upstreamStatus = 403;
      throw new GatewayError('UPSTREAM_IP_NOT_WHITELISTED', 'The provider refused the egress IP.');
    });
    await h.post('k1').expect(502);
    h.setForward(async (_key, locals) => {
      locals.upstreamAnswered = true;
      locals.upstreamStatus = 401;
      throw new GatewayError('UPSTREAM_AUTH_FAILED', 'The upstream refused the gateway credentials.');
    });
    await h.post('k1').expect(502);
    h.setForward(async () => ({ status: 200, headers: {}, body: Buffer.from('{"done":true}') }));
    const done = await h.post('k1').expect(200);
    expect(done.headers['idempotent-replayed']).toBeUndefined();
    expect(h.calls).toHaveLength(4);
    expect(h.outcomes).toEqual([
      'claimed',
      'released',
      'claimed',
      'released',
      'claimed',
      'released',
      'claimed',
      'kept',
    ]);
  });

  test('a timeout after sending is kept as 504 UPSTREAM_OUTCOME_UNKNOWN: a retry is never sent', async () => {
    const h = harness();
    h.setForward(async (_key, locals) => {
      locals.upstreamUnknown = true;
      throw new GatewayError('UPSTREAM_TIMEOUT', 'The upstream did not answer in time.');
    });
    const first = await h.post('k1').expect(504);
    expect(first.body.status.description).toBe('UPSTREAM_OUTCOME_UNKNOWN');
    const again = await h.post('k1').expect(504);
    expect(again.text).toBe(first.text);
    expect(h.calls).toHaveLength(1);
  });

  test('forwardIdempotencyKey: the key travels upstream and an unknown outcome releases the claim', async () => {
    const h = harness({ policy: { idempotency: 'optional', forwardIdempotencyKey: true } });
    h.setForward(async (_key, locals) => {
      locals.upstreamUnknown = true;
      throw new GatewayError('UPSTREAM_TIMEOUT', 'The upstream did not answer in time.');
    });
    const first = await h.post('k1').expect(504);
    expect(first.body.status.description).toBe('UPSTREAM_TIMEOUT');
    h.setForward(async () => ({ status: 200, headers: {}, body: Buffer.from('{}') }));
    await h.post('k1').expect(200);
    expect(h.calls).toEqual(['k1', 'k1']);
  });

  test('without forwardIdempotencyKey the key never travels upstream; `none` ignores the header', async () => {
    const h = harness();
    await h.post('k1').expect(200);
    expect(h.calls).toEqual([undefined]);
    const none = harness({ policy: { idempotency: 'none', forwardIdempotencyKey: false } });
    await none.post('k1').expect(200);
    await none.post('a malformed key').expect(200);
    await none.post('k1').expect(200);
    expect(none.calls).toEqual([undefined, undefined, undefined]);
    expect(none.commands).toEqual([]);
  });

  test('required: a request without the key is 400 INVALID_REQUEST and never forwarded', async () => {
    const h = harness({ policy: { idempotency: 'required', forwardIdempotencyKey: false } });
    const missing = await h.post().expect(400);
    expect(missing.body.status.description).toBe('INVALID_REQUEST');
    expect(h.calls).toHaveLength(0);
  });

  test.each([
    ['empty', ''],
    ['256 characters', 'x'.repeat(256)],
    ['a space', 'a b'],
    ['a tab', 'a\tb'],
  ])('a hostile key (%s): 400, nothing claimed or kept', async (_name, key) => {
    const h = harness();
    const refused = await h.post(key).expect(400);
    expect(refused.body.errors[0].path).toBe('header:Idempotency-Key');
    expect(h.commands).toEqual([]);
    expect(h.calls).toHaveLength(0);
  });

  test('the store failing: a keyed request is 503 IDEMPOTENCY_UNAVAILABLE with Retry-After, an unkeyed one served', async () => {
    const down = new Error('Connection is closed.');
    const h = harness({
      store: {
        claim: async () => Promise.reject(down),
        keep: async () => Promise.reject(down),
        release: async () => Promise.reject(down),
      },
    });
    const refused = await h.post('k1').expect(503);
    expect(refused.body.status.description).toBe('IDEMPOTENCY_UNAVAILABLE');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    await h.post().expect(200);
    expect(h.calls).toHaveLength(1);
  });
});

describe('repeatDecision', () => {
  const answer = { status: 200, headers: {}, body: Buffer.from('x') };
  test.each([
    ['gone between claim and read', undefined, 'in_use'],
    ['unreadable', null, 'unavailable'],
    ['another fingerprint', { state: 'kept', fingerprint: 'other', answer }, 'reused'],
    ['kept', { state: 'kept', fingerprint: 'fp', answer }, 'replay'],
    ['claimed, lease running', { state: 'claimed', fingerprint: 'fp', leaseUntil: 1_500 }, 'in_use'],
    ['claimed, lease over', { state: 'claimed', fingerprint: 'fp', leaseUntil: 1_000 }, 'outcome_unknown'],
  ] as const)('%s: %s', (_name, record, kind) => {
    expect(repeatDecision(record, 'fp', 1_000).kind).toBe(kind);
  });
});
