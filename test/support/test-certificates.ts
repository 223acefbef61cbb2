// Throwaway PKI for TLS tests, made at run time (@peculiar/x509 on Node's WebCrypto): a CA and the server
// certificates a provider could present — good, expired, for another host, and one from a CA nobody trusts.
// tsyringe (inside @peculiar/x509) needs the Reflect metadata polyfill loaded first.
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as x509 from '@peculiar/x509';
import { tempDir } from './temp-dir';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

type KeyPair = webcrypto.CryptoKeyPair;

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const DAY_MS = 86_400_000;

export interface ServerCertificate {
  /** PEM certificate and PKCS#8 key, as SimulatorOptions.tls takes them. */
  readonly cert: string;
  readonly key: string;
}

export interface TestPki {
  /** PEM of the trusted test CA, and a file holding it (for UPSTREAM_CA_FILE). */
  readonly caPem: string;
  readonly caFile: string;
  /** For 127.0.0.1 and localhost, signed by the CA, valid now. */
  readonly good: ServerCertificate;
  /** Signed by the CA, but its validity ended yesterday. */
  readonly expired: ServerCertificate;
  /** Signed by the CA, valid, for payments.other.example only. */
  readonly wrongHost: ServerCertificate;
  /** For 127.0.0.1, valid, signed by a CA that is not in UPSTREAM_CA_FILE. */
  readonly untrusted: ServerCertificate;
  /** A client certificate (clientAuth) signed by the CA, for mutual TLS; and one signed by the stranger CA. */
  readonly client: ServerCertificate;
  readonly untrustedClient: ServerCertificate;
  /** Writes a server certificate and key to files (for SIMULATOR_TLS_CERT_FILE / SIMULATOR_TLS_KEY_FILE). */
  files(certificate: ServerCertificate): { certFile: string; keyFile: string };
}

interface Authority {
  readonly cert: x509.X509Certificate;
  readonly keys: KeyPair;
}

async function makeAuthority(name: string): Promise<Authority> {
  const keys = (await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify'])) as KeyPair;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    name: `CN=${name}`,
    keys,
    signingAlgorithm: ALGORITHM,
    notBefore: new Date(Date.now() - DAY_MS),
    notAfter: new Date(Date.now() + 30 * DAY_MS),
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { cert, keys };
}

async function issue(
  authority: Authority,
  names: { dns: string[]; ip: string[] },
  validity: { notBefore: Date; notAfter: Date },
  usage: x509.ExtendedKeyUsage = x509.ExtendedKeyUsage.serverAuth,
): Promise<ServerCertificate> {
  const keys = (await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify'])) as KeyPair;
  const cert = await x509.X509CertificateGenerator.create({
    subject: `CN=${names.dns[0] ?? names.ip[0]}`,
    issuer: authority.cert.subject,
    publicKey: keys.publicKey,
    signingKey: authority.keys.privateKey,
    signingAlgorithm: ALGORITHM,
    ...validity,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([usage]),
      new x509.SubjectAlternativeNameExtension([
        ...names.dns.map((value) => ({ type: 'dns' as const, value })),
        ...names.ip.map((value) => ({ type: 'ip' as const, value })),
      ]),
      await x509.AuthorityKeyIdentifierExtension.create(authority.keys.publicKey),
    ],
  });
  const pkcs8 = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
  return { cert: cert.toString('pem'), key: x509.PemConverter.encode(pkcs8, 'PRIVATE KEY') };
}

export async function createTestPki(): Promise<TestPki> {
  const [ca, stranger] = await Promise.all([
    makeAuthority('BFF Test CA'),
    makeAuthority('Nobody Trusts Me CA'),
  ]);
  const now = Date.now();
  const valid = { notBefore: new Date(now - DAY_MS), notAfter: new Date(now + 7 * DAY_MS) };
  const loopback = { dns: ['localhost'], ip: ['127.0.0.1'] };
  const gateway = { dns: ['bff-gateway'], ip: [] };
  const [good, expired, wrongHost, untrusted, client, untrustedClient] = await Promise.all([
    issue(ca, loopback, valid),
    issue(ca, loopback, { notBefore: new Date(now - 10 * DAY_MS), notAfter: new Date(now - DAY_MS) }),
    issue(ca, { dns: ['payments.other.example'], ip: [] }, valid),
    issue(stranger, loopback, valid),
    issue(ca, gateway, valid, x509.ExtendedKeyUsage.clientAuth),
    issue(stranger, gateway, valid, x509.ExtendedKeyUsage.clientAuth),
  ]);
  const dir = tempDir('bff-pki-');
  const caPem = ca.cert.toString('pem');
  const caFile = join(dir, 'ca.pem');
  writeFileSync(caFile, caPem);
  let count = 0;
  return {
    caPem,
    caFile,
    good,
    expired,
    wrongHost,
    untrusted,
    client,
    untrustedClient,
    files(certificate) {
      count += 1;
      const certFile = join(dir, `server-${count}.crt`);
      const keyFile = join(dir, `server-${count}.key`);
      writeFileSync(certFile, certificate.cert);
      writeFileSync(keyFile, certificate.key, { mode: 0o600 });
      return { certFile, keyFile };
    },
  };
}
