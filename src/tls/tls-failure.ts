// Names a TLS failure toward the upstream from its OpenSSL/Node error code, with the operator's fix.

export interface TlsFailure {
  /** The OpenSSL/Node code, e.g. CERT_HAS_EXPIRED. */
  readonly code: string;
  /** What went wrong, in a few words. */
  readonly cause: string;
  readonly fix: string;
}

const UNTRUSTED = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
  'CERT_SIGNATURE_FAILURE',
]);

/** The TLS failure behind `error` (its `code`, or a `cause` chain's, as fetch wraps it), or undefined. */
export function tlsFailureOf(error: unknown): TlsFailure | undefined {
  for (let current = error, depth = 0; current && depth < 5; depth += 1) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') {
      const failure = describeTlsCode(code);
      if (failure) return failure;
    }
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

export function describeTlsCode(code: string): TlsFailure | undefined {
  if (UNTRUSTED.has(code))
    return {
      code,
      cause: "the upstream's certificate is not signed by a trusted CA",
      fix: "set UPSTREAM_CA_FILE to the provider's CA (or the TLS-inspecting proxy's CA); never disable verification",
    };
  if (code === 'CERT_HAS_EXPIRED')
    return {
      code,
      cause: "the upstream's certificate expired",
      fix: "the provider's certificate expired: ask the provider to renew it (and check this machine's clock)",
    };
  if (code === 'CERT_NOT_YET_VALID')
    return {
      code,
      cause: "the upstream's certificate is not valid yet",
      fix: "check this machine's clock, or ask the provider about the certificate's start date",
    };
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID' || code === 'HOSTNAME_MISMATCH')
    return {
      code,
      cause: "the upstream's certificate is for another host name",
      fix: 'UPSTREAM_BASE_URL host does not match the certificate: use the host name the provider documents',
    };
  if (
    code.startsWith('CERT_') ||
    code.startsWith('ERR_TLS_') ||
    code.startsWith('ERR_SSL_') ||
    code === 'EPROTO'
  )
    return {
      code,
      cause: 'the TLS handshake with the upstream failed',
      fix: 'check that UPSTREAM_BASE_URL speaks https on that port and that its certificate chain is complete',
    };
  return undefined;
}
