// Reads the PEM files TLS settings name (a CA bundle, a client certificate and its key), each problem naming its variable.
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';

type Fail = (variable: string, message: string) => void;

/** Client certificate and key for mutual TLS, and the CAs trusted on top of Node's roots. PEM text throughout. */
export interface TlsClientFiles {
  readonly ca?: readonly string[];
  readonly cert?: string;
  /** A secret: held for the TLS handshake only, never printed (load-config never echoes its file's content). */
  readonly key?: string;
}

function readText(variable: string, file: string, what: string, fail: Fail): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    fail(variable, `names a file that cannot be read (${what})`);
    return undefined;
  }
}

/** The CA certificates of a PEM bundle, each checked to parse, or undefined after a problem. */
export function readCaFile(variable: string, file: string, fail: Fail): string[] | undefined {
  const text = readText(variable, file, 'a PEM file of the CA certificates to trust', fail);
  if (text === undefined) return undefined;
  const pems = text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  try {
    for (const pem of pems) new X509Certificate(pem);
  } catch {
    pems.length = 0;
  }
  if (pems.length === 0) {
    fail(variable, 'holds no valid PEM certificate (-----BEGIN CERTIFICATE-----)');
    return undefined;
  }
  return pems;
}

interface ClientFileNames {
  readonly caVariable: string;
  readonly certVariable: string;
  readonly keyVariable: string;
  readonly caFile?: string;
  readonly certFile?: string;
  readonly keyFile?: string;
}

/**
 * A client certificate and its key (both or neither, and matching), and extra CAs. The CAs come on top of Node's
 * roots, as UPSTREAM_CA_FILE does: a managed Redis with a public certificate still verifies.
 */
export function readTlsClientFiles(names: ClientFileNames, fail: Fail): TlsClientFiles {
  const ca = names.caFile ? readCaFile(names.caVariable, names.caFile, fail) : undefined;
  if ((names.certFile === undefined) !== (names.keyFile === undefined)) {
    fail(
      names.certFile ? names.keyVariable : names.certVariable,
      `${names.certVariable} and ${names.keyVariable} go together`,
    );
    return { ca: ca && [...rootCertificates, ...ca] };
  }
  if (!names.certFile || !names.keyFile) return { ca: ca && [...rootCertificates, ...ca] };
  const certText = readText(names.certVariable, names.certFile, 'the PEM client certificate', fail);
  const keyText = readText(
    names.keyVariable,
    names.keyFile,
    'the PEM private key of the client certificate',
    fail,
  );
  if (certText === undefined || keyText === undefined) return {};
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(certText);
  } catch {
    fail(names.certVariable, 'holds no valid PEM certificate (-----BEGIN CERTIFICATE-----)');
    return {};
  }
  try {
    if (!certificate.checkPrivateKey(createPrivateKey(keyText)))
      fail(names.keyVariable, `is not the private key of the certificate in ${names.certVariable}`);
  } catch {
    fail(names.keyVariable, 'holds no PEM private key (-----BEGIN PRIVATE KEY-----, unencrypted)');
  }
  return { ca: ca && [...rootCertificates, ...ca], cert: certText, key: keyText };
}
