// Redis connection settings: TLS for rediss:// and REDIS_TLS, auth, and descriptions that never show a password.
import type { GatewayConfig, RedisTopology } from '../../../src/config/gateway-config';
import { describeRedisTopology, redisNodeOptions } from '../../../src/store/redis-connection';

const redis = (overrides: Partial<GatewayConfig['redis']>): GatewayConfig['redis'] => ({
  topology: { kind: 'standalone', url: 'redis://cache:6379' },
  tls: false,
  keyPrefix: 'bff:',
  allowMemoryStore: false,
  ...overrides,
});

describe('redisNodeOptions', () => {
  test('redis:// without REDIS_TLS: plain TCP, fail-fast commands', () => {
    const options = redisNodeOptions(redis({}));
    expect(options.tls).toBeUndefined();
    expect(options.enableOfflineQueue).toBe(false);
    expect(options.maxRetriesPerRequest).toBe(1);
  });

  test('rediss:// turns TLS on', () => {
    const options = redisNodeOptions(redis({ topology: { kind: 'standalone', url: 'rediss://cache:6380' } }));
    expect(options.tls).toEqual({});
  });

  test('REDIS_TLS turns TLS on for Sentinel and Cluster nodes too', () => {
    const cluster = redis({ tls: true, topology: { kind: 'cluster', nodes: [{ host: 'a', port: 7000 }] } });
    expect(redisNodeOptions(cluster).tls).toEqual({});
  });

  test('the client certificate and CAs go to every node of every topology (Cluster nodes take redisOptions)', () => {
    const tlsFiles = { ca: ['CA PEM'], cert: 'CERT PEM', key: 'KEY PEM' };
    const topologies: RedisTopology[] = [
      { kind: 'standalone', url: 'rediss://cache:6380' },
      { kind: 'sentinel', sentinels: [{ host: 's', port: 26379 }], name: 'mymaster' },
      { kind: 'cluster', nodes: [{ host: 'a', port: 7000 }] },
    ];
    for (const topology of topologies)
      expect(redisNodeOptions(redis({ tls: true, tlsFiles, topology })).tls).toEqual({
        ca: ['CA PEM'],
        cert: 'CERT PEM',
        key: 'KEY PEM',
      });
    // Without TLS there is no handshake to show them in (load-config refuses the files then).
    expect(redisNodeOptions(redis({ tlsFiles })).tls).toBeUndefined();
  });

  test('REDIS_PASSWORD is sent; without retry the doctor gives up after one failure', () => {
    const options = redisNodeOptions(redis({ password: 's3cret' }), { retry: false });
    expect(options.password).toBe('s3cret');
    expect(options.retryStrategy?.(1)).toBeNull();
    expect(redisNodeOptions(redis({})).retryStrategy?.(1)).toBe(200);
  });
});

test('describeRedisTopology never shows the URL credentials', () => {
  expect(describeRedisTopology({ kind: 'standalone', url: 'rediss://user:pw-123@cache:6380/0' })).toBe(
    'Redis (TLS) at cache:6380',
  );
  expect(
    describeRedisTopology({ kind: 'sentinel', name: 'mymaster', sentinels: [{ host: 's1', port: 26379 }] }),
  ).toBe('Redis master "mymaster" via Sentinel s1:26379');
  expect(describeRedisTopology({ kind: 'cluster', nodes: [{ host: 'n1', port: 7000 }] })).toBe(
    'Redis Cluster n1:7000',
  );
});
