import { decodeJwt, decodeProtectedHeader } from 'jose';
import { createTokenIssuer } from '../../../src/simulator/token-issuer';

function issuerAt(start: number) {
  const clock = { now: start };
  const issuer = createTokenIssuer({
    accessTtlSeconds: 300,
    refreshTtlSeconds: 86_400,
    now: () => clock.now,
  });
  return { issuer, clock };
}

describe('token issuer', () => {
  it('signs simplejwt-shaped HS256 pairs', async () => {
    const { issuer } = issuerAt(1_700_000_000_000);
    const pair = await issuer.issuePair(7);
    expect(decodeProtectedHeader(pair.access)).toEqual({ alg: 'HS256', typ: 'JWT' });
    const access = decodeJwt(pair.access);
    const refresh = decodeJwt(pair.refresh);
    expect(access).toMatchObject({
      token_type: 'access',
      user_id: 7,
      iat: 1_700_000_000,
      exp: 1_700_000_300,
    });
    expect(refresh).toMatchObject({
      token_type: 'refresh',
      user_id: 7,
      iat: 1_700_000_000,
      exp: 1_700_086_400,
    });
    expect(access.jti).toMatch(/^[0-9a-f]{32}$/);
    expect(access.jti).not.toBe(refresh.jti);
  });

  it('verifies only the expected type', async () => {
    const { issuer } = issuerAt(Date.now());
    const pair = await issuer.issuePair(1);
    expect(await issuer.verify(pair.access, 'access')).toMatchObject({ token_type: 'access' });
    expect(await issuer.verify(pair.refresh, 'refresh')).toMatchObject({ token_type: 'refresh' });
    expect(await issuer.verify(pair.access, 'refresh')).toBeNull();
    expect(await issuer.verify(pair.refresh, 'access')).toBeNull();
    expect(await issuer.verify('not.a.jwt', 'access')).toBeNull();
  });

  it('refuses a token once its exp has passed', async () => {
    const { issuer, clock } = issuerAt(1_700_000_000_000);
    const { access } = await issuer.issuePair(1);
    clock.now += 299_000;
    expect(await issuer.verify(access, 'access')).not.toBeNull();
    clock.now += 1_000;
    expect(await issuer.verify(access, 'access')).toBeNull();
  });

  it('refuses a token whose signature was tampered with', async () => {
    const { issuer } = issuerAt(Date.now());
    const { access } = await issuer.issuePair(1);
    const [header, payload] = access.split('.');
    const forged = `${header}.${payload}.${Buffer.alloc(32).toString('base64url')}`;
    expect(await issuer.verify(forged, 'access')).toBeNull();
  });

  it('revokes everything issued so far, but not what comes after', async () => {
    const { issuer } = issuerAt(Date.now());
    const before = await issuer.issuePair(1);
    issuer.revokeAll();
    const after = await issuer.issuePair(1);
    expect(await issuer.verify(before.access, 'access')).toBeNull();
    expect(await issuer.verify(before.refresh, 'refresh')).toBeNull();
    expect(await issuer.verify(after.access, 'access')).not.toBeNull();
  });

  it('blacklists one token by jti', async () => {
    const { issuer } = issuerAt(Date.now());
    const pair = await issuer.issuePair(1);
    const claims = await issuer.verify(pair.refresh, 'refresh');
    issuer.blacklist(claims!.jti);
    expect(await issuer.verify(pair.refresh, 'refresh')).toBeNull();
    expect(await issuer.verify(pair.access, 'access')).not.toBeNull();
  });

  it('stops accepting tokens signed with the previous key after a rotation', async () => {
    const { issuer } = issuerAt(Date.now());
    const before = await issuer.issuePair(1);
    issuer.rotateSigningKey();
    const after = await issuer.issuePair(1);
    expect(await issuer.verify(before.access, 'access')).toBeNull();
    expect(await issuer.verify(after.access, 'access')).not.toBeNull();
  });
});
