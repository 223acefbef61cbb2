// The security edges of issue 42 against real gateway processes (local mode, behind a proxy on loopback): an
// allow-list inside the trusted proxies is refused at start; X-Forwarded-For entries with a port are one caller, for
// the failure limit, the allow-list and the log; a form with too many fields is a 413 envelope, its body never logged.
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process';

const PLAN = '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992';
const KEY = 'local-dev-key';

interface LogLine {
  level: number;
  msg: string;
  clientIp?: string;
  requestId?: string;
  blocks?: string[];
  failed?: number;
  refused?: number;
}

const logLines = (gateway: GatewayProcess): LogLine[] =>
  gateway
    .logs()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as LogLine);

/** A request as the proxy on loopback forwards it, naming the caller `forwardedFor`. */
async function call(gateway: GatewayProcess, forwardedFor: string, key: string, requestId: string) {
  const res = await fetch(gateway.url + PLAN, {
    headers: { 'x-api-key': key, 'x-forwarded-for': forwardedFor, 'x-request-id': requestId },
  });
  await res.arrayBuffer();
  return res.status;
}

describe('an INBOUND_ALLOW_CIDRS that overlaps TRUST_PROXY', () => {
  test('stops the gateway at start, saying to name the proxies exactly: a trusted caller could claim any address', async () => {
    // Before: the gateway started, and a caller at 127.0.0.1 (inside the trusted 127.0.0.0/8) wrote
    // X-Forwarded-For: 127.0.0.2 and was let in by the allow-list.
    await expect(
      startGatewayProcess({ env: { TRUST_PROXY: '127.0.0.0/8', INBOUND_ALLOW_CIDRS: '127.0.0.2' } }),
    ).rejects.toThrow(
      /gateway exited during start-up[\s\S]*INBOUND_ALLOW_CIDRS: 127\.0\.0\.2 overlaps the TRUST_PROXY ranges.*the proxies' exact addresses/,
    );
  });

  test('a whole private block in TRUST_PROXY starts, with one warning naming the blocks', async () => {
    const gateway = await startGatewayProcess({ env: { TRUST_PROXY: 'loopback,10.0.0.0/8' } });
    try {
      const warning = logLines(gateway).find((line) =>
        line.msg.startsWith('TRUST_PROXY trusts whole private'),
      );
      expect(warning).toMatchObject({ level: 40, blocks: ['10.0.0.0/8'] });
    } finally {
      await gateway.stop();
    }
  });
});

describe('a hop count in TRUST_PROXY with an INBOUND_ALLOW_CIDRS', () => {
  test('starts with one warning: a caller reaching the port directly could claim an allowed address', async () => {
    const gateway = await startGatewayProcess({
      env: { TRUST_PROXY: '1', INBOUND_ALLOW_CIDRS: '127.0.0.2' },
      probeHeaders: { 'x-forwarded-for': '127.0.0.2' },
    });
    try {
      // What the warning describes: the direct caller at 127.0.0.1 is refused, until it names an allowed address.
      const status = async (headers: Record<string, string>) =>
        (await fetch(gateway.url + PLAN, { headers: { 'x-api-key': KEY, ...headers } })).status;
      expect(await status({})).toBe(403);
      expect(await status({ 'x-forwarded-for': '127.0.0.2' })).toBe(200);
      const warnings = logLines(gateway).filter((line) => line.msg.startsWith('TRUST_PROXY is a hop count'));
      expect(warnings).toEqual([expect.objectContaining({ level: 40, trustProxy: 1 })]);
    } finally {
      await gateway.stop();
    }
  });
});

describe('X-Forwarded-For entries with a port, behind a trusted proxy (TRUST_PROXY=loopback)', () => {
  let gateway: GatewayProcess;

  beforeAll(async () => {
    gateway = await startGatewayProcess({
      env: {
        TRUST_PROXY: 'loopback',
        INBOUND_ALLOW_CIDRS: '198.51.100.0/24,2001:db8::/32',
        AUTH_FAILURE_LIMIT: '3',
      },
      // The probes pass the allow-list too: the proxy names a caller inside it.
      probeHeaders: { 'x-forwarded-for': '198.51.100.1' },
    });
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  test('bad keys from one address with changing ports are one caller: blocked after the limit', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++)
      statuses.push(await call(gateway, `198.51.100.7:${40_000 + i}`, 'wrong-key-0123456789', `bad-${i}`));
    expect(statuses).toEqual([401, 401, 401, 429, 429, 429]);
  });

  test('the allow-list reads the address without its port, IPv4 and bracketed IPv6 alike, and the log names it', async () => {
    expect(await call(gateway, '198.51.100.8:5678', KEY, 'v4-with-port')).toBe(200);
    expect(await call(gateway, '[2001:db8::8]:443', KEY, 'v6-with-port')).toBe(200);
    // A proxy that writes no address at all: the proxy's own (socket) address is the caller, outside the list.
    expect(await call(gateway, 'unknown', KEY, 'no-address')).toBe(403);
    for (let i = 0; i < 50 && logLines(gateway).filter((l) => l.msg === 'request').length < 2; i++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    const requests = logLines(gateway).filter((line) => line.msg === 'request');
    expect(requests.map((line) => [line.requestId, line.clientIp])).toEqual(
      expect.arrayContaining([
        ['v4-with-port', '198.51.100.8'],
        ['v6-with-port', '2001:db8::8'],
      ]),
    );
  });
});

describe('POST /bff/backchannel-logout with more form fields than the parser takes', () => {
  test('is 413 PAYLOAD_TOO_LARGE in the envelope, and no log line carries the body', async () => {
    const gateway = await startGatewayProcess({ env: {} });
    try {
      const marker = 'BODY-MARKER-issue-42';
      const fields = [`logout_token=${marker}`, ...Array.from({ length: 11 }, (_, i) => `f${i}=${marker}`)];
      const res = await fetch(`${gateway.url}/bff/backchannel-logout`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-request-id': 'many-fields' },
        body: fields.join('&'),
      });
      expect(res.status).toBe(413);
      expect(await res.json()).toEqual({
        status: { code: '413', description: 'PAYLOAD_TOO_LARGE', detail: expect.any(String) },
        requestId: 'many-fields',
      });
      const charset = await fetch(`${gateway.url}/bff/backchannel-logout`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded; charset=x-unknown' },
        body: `logout_token=${marker}`,
      });
      expect(charset.status).toBe(415);
      await gateway.stop();
      expect(gateway.logs()).not.toContain(marker);
      expect(logLines(gateway).filter((line) => line.msg === 'unhandled error')).toEqual([]);
    } finally {
      await gateway.stop();
    }
  });
});
