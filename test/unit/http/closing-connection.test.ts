// Requests pipelined behind an answer that closes the connection (a draining replica's, a missing Host's) are never
// run: Node would never write their answers, and running them would still call the provider for nothing.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import pino from 'pino';
import { errorEnvelopeHandler } from '../../../src/http/error-envelope';
import { requestContext } from '../../../src/http/request-context';
import { createMetrics } from '../../../src/observability/metrics';
import { rawExchange, serversClosedAfterEach } from '../../support/raw-http';

const servers = serversClosedAfterEach();

/** An app with the gateway's first middleware; `ran` counts the requests its route ran. */
async function gatewayLike(draining: boolean): Promise<{ port: number; ran: string[] }> {
  const ran: string[] = [];
  const app = express();
  app.use(
    requestContext({ logger: pino({ level: 'silent' }), metrics: createMetrics(), readiness: { draining } }),
  );
  app.get('/call/:n', (req, res) => {
    ran.push(req.params.n);
    res.json({ n: req.params.n });
  });
  app.use(errorEnvelopeHandler());
  const server = createServer({ requireHostHeader: false }, app);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, ran };
}

const call = (n: number, host = 'Host: x\r\n') => `GET /call/${n} HTTP/1.1\r\n${host}\r\n`;

describe('requests pipelined behind an answer that closes the connection', () => {
  it('a draining replica runs the first request and none of those read behind it', async () => {
    const { port, ran } = await gatewayLike(true);
    const answer = await rawExchange(port, call(1) + call(2) + call(3));
    expect(ran).toEqual(['1']);
    expect(answer.match(/^HTTP\/1\.1 \d{3} /gm)).toHaveLength(1);
    expect(answer).toMatch(/connection: close/i);
  });

  it('behind an HTTP/1.1 request without Host (400): nothing behind it runs', async () => {
    const { port, ran } = await gatewayLike(false);
    const answer = await rawExchange(port, call(1, '') + call(2));
    expect(ran).toEqual([]);
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer.match(/^HTTP\/1\.1 \d{3} /gm)).toHaveLength(1);
  });

  it('a keep-alive connection not closing runs every pipelined request (the check drops nothing else)', async () => {
    const { port, ran } = await gatewayLike(false);
    const answer = await rawExchange(port, call(1) + call(2) + call(3));
    expect(ran).toEqual(['1', '2', '3']);
    expect(answer.match(/HTTP\/1\.1 200 /g)).toHaveLength(3);
  });
});
