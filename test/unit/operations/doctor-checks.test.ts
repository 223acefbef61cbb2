// The doctor loads the client registry exactly as the gateway would, production refusals included.
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { loadConfig } from '../../../src/config/load-config';
import { checkClientRegistry } from '../../../src/operations/doctor-checks';

const LOCAL_REGISTRY = resolve(__dirname, '../../../config/clients.local.json');
const upstream = {
  UPSTREAM_BASE_URL: 'https://api.payments.example.com',
  UPSTREAM_USERNAME: 'merchant',
  UPSTREAM_PASSWORD: 'secret-password',
  CLIENTS_FILE: LOCAL_REGISTRY,
};

describe('checkClientRegistry', () => {
  it('fails in production on a registry holding the development key, as the gateway refuses to start', () => {
    const config = loadConfig({
      ...upstream,
      NODE_ENV: 'production',
      REDIS_URL: 'rediss://redis:6380',
      TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      METRICS_PORT: '9464',
    });
    const check = checkClientRegistry(config);
    expect(check).toMatchObject({ kind: 'invalid', file: LOCAL_REGISTRY });
    expect(JSON.stringify(check)).toMatch(/development key/);
    expect(JSON.stringify(check)).not.toContain('local-dev-key');
  });

  it('loads the same registry outside production', () => {
    const config = loadConfig({ ...upstream, NODE_ENV: 'development' });
    expect(checkClientRegistry(config)).toEqual({ kind: 'loaded', file: LOCAL_REGISTRY, clients: 2 });
  });
});
