// The Redis key layout of docs/architecture.md, built in one module: stable names, one slot per credential.
import { createHash } from 'node:crypto';
import { sha256Base64Url, sha256Hex } from '../../../src/keys/hash';
import {
  answerKey,
  authFailurePrefix,
  planCachePrefix,
  rateLimitPrefix,
  sessionKeys,
  tokenKeys,
  userRateLimitPrefix,
} from '../../../src/keys/redis-keys';

const sha16 = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 16);

describe('Redis key layout', () => {
  test('token keys are <prefix>{token:<first 16 hex of sha256(upstream \\n username)>}:<name>', () => {
    const h = sha16('https://api.example\nmerchant');
    expect(tokenKeys('bff:', 'https://api.example', 'merchant')).toEqual({
      pair: `bff:{token:${h}}:pair`,
      lock: `bff:{token:${h}}:lock`,
      failure: `bff:{token:${h}}:failure`,
      transient: `bff:{token:${h}}:transient`,
      channel: `bff:{token:${h}}:changed`,
    });
  });

  test('another upstream, username or prefix never shares a pair', () => {
    const pairs = [
      tokenKeys('bff:', 'https://sandbox.example', 'merchant').pair,
      tokenKeys('bff:', 'https://api.example', 'merchant').pair,
      tokenKeys('bff:', 'https://api.example', 'other').pair,
      tokenKeys('other:', 'https://api.example', 'merchant').pair,
    ];
    expect(new Set(pairs).size).toBe(pairs.length);
  });

  test('the plan cache is namespaced by upstream, account and username; limits by window length', () => {
    const prefix = planCachePrefix('bff:', 'https://api.example', 'default', 'merchant');
    expect(prefix).toBe(`bff:cache:${sha16('https://api.example\naccount:default\nuser:merchant')}:`);
    const others = [
      planCachePrefix('bff:', 'https://sandbox.example', 'default', 'merchant'),
      planCachePrefix('bff:', 'https://api.example', 'br', 'merchant'),
      planCachePrefix('bff:', 'https://api.example', 'default', 'other-merchant'),
    ];
    expect(new Set([prefix, ...others]).size).toBe(4);
    expect(prefix + answerKey('plan', '/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992')).toBe(
      `${prefix}plan:/api/subscriptions/plan/b8546575-5d4f-4a56-9e21-522d01cf5992`,
    );
    // With the catalogue's answer version: a reload that changes the answer schema reads under another key.
    expect(answerKey('subscription', '/api/subscriptions/sub_1', '0123456789ab')).toBe(
      'subscription@0123456789ab:/api/subscriptions/sub_1',
    );
    expect(rateLimitPrefix('bff:', 60)).toBe('bff:rl:60:');
    expect(authFailurePrefix('bff:', 300)).toBe('bff:authfail:300:');
    expect(userRateLimitPrefix('bff:', 60)).toBe('bff:rl-user:60:');
  });

  test('a browser session keeps its records and lock in one hash tag; provider ids are hashed, never stored', () => {
    const keys = sessionKeys('bff:');
    expect([keys.presence('h1'), keys.grant('h1'), keys.lock('h1')]).toEqual([
      'bff:session:{h1}',
      'bff:session:{h1}:grant',
      'bff:session:{h1}:lock',
    ]);
    expect(keys.bySid('sid-1')).toBe(
      `bff:session-sid:${createHash('sha256').update('sid-1').digest('base64url')}`,
    );
    expect(keys.bySub('alice')).not.toContain('alice');
    // One issuer's jti never names another issuer's: the hash covers both, split by a newline no URL holds.
    expect(keys.usedLogoutToken('https://idp.example', 'j1')).toMatch(/^bff:session-logout-jti:[\w-]{43}$/);
    expect(keys.usedLogoutToken('https://idp.example', 'j1')).not.toBe(
      keys.usedLogoutToken('https://idp.example/', 'j1'),
    );
    expect(sha256Base64Url('x')).toBe(createHash('sha256').update('x').digest('base64url'));
  });

  test('sha256Hex is the lower-case hex SHA-256 of the UTF-8 text', () => {
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(sha256Hex('ñ')).toBe(createHash('sha256').update('ñ', 'utf8').digest('hex'));
  });
});
