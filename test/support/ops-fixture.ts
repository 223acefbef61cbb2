// Shared setup of gateway tests: a client registry file and a gateway config pointing at a simulator.
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { tempDir } from './temp-dir';

export const API_KEY = 'ops-test-key-0123456789abcdef';
export const LIMITED_KEY = 'ops-limited-key-0123456789abcdef';
export const USERNAME = 'ops-merchant';
export const PASSWORD = 'ops-Sup3r-Secret-Passw0rd';
export const PLAN_ID = 'b8546575-5d4f-4a56-9e21-522d01cf5992';

const hash = (key: string) => `sha256:${createHash('sha256').update(key).digest('hex')}`;

/** A registry with an ordinary client and one whose limit (2 a minute) is easy to hit. */
export function writeClientsFile(): string {
  const dir = tempDir('bff-ops-');
  const file = join(dir, 'clients.json');
  writeFileSync(
    file,
    JSON.stringify({
      clients: [
        { id: 'ops-client', keys: [hash(API_KEY)], scopes: ['documents:validate', 'plans:read'] },
        {
          id: 'ops-limited',
          keys: [hash(LIMITED_KEY)],
          scopes: ['plans:read'],
          rateLimit: { limit: 2, windowSeconds: 60 },
        },
      ],
    }),
  );
  return file;
}

/** Environment of a gateway in front of `upstreamUrl` (plain http is allowed: tests). */
export function gatewayEnv(upstreamUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    NODE_ENV: 'test',
    HOST: '127.0.0.1',
    PORT: '0',
    LOG_LEVEL: 'info',
    UPSTREAM_BASE_URL: upstreamUrl,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: USERNAME,
    UPSTREAM_PASSWORD: PASSWORD,
    CLIENTS_FILE: writeClientsFile(),
    ...extra,
  };
}

/** A log sink that keeps every line, for assertions on what was (not) logged. */
export function captureLogs(): { stream: Writable; text(): string } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  return { stream, text: () => text };
}
