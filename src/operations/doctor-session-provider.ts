// The doctor's browser-sessions check: the provider's discovery document, and the web app's registry entry.
import { loadClientRegistry } from '../callers/client-registry';
import type { GatewayConfig } from '../config/gateway-config';
import type { DoctorStep } from './doctor';

const DISCOVERY_TIMEOUT_MS = 5_000;
export const SESSION_PROVIDER_TITLE = 'session provider';

/** What the provider's discovery document and the registry say. Never holds the client secret. */
export type SessionProviderCheck =
  | { readonly kind: 'unreachable'; readonly issuer: string; readonly problem: string }
  | {
      readonly kind: 'discovered';
      readonly issuer: string;
      /** Browser sessions cannot work: each names what is wrong. */
      readonly problems: readonly string[];
      /** They work, with a part missing. */
      readonly warnings: readonly string[];
    };

type Metadata = Record<string, unknown>;
const lists = (metadata: Metadata, field: string, value: string) =>
  !Array.isArray(metadata[field]) || (metadata[field] as unknown[]).includes(value);

/** Fetches `<SESSION_ISSUER>/.well-known/openid-configuration` and checks what login, revalidation and logout need. */
export async function checkSessionProvider(config: GatewayConfig): Promise<SessionProviderCheck | undefined> {
  const settings = config.sessions;
  if (!settings?.issuer) return undefined;
  const issuer = settings.issuer;
  const url = `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
  let metadata: Metadata;
  try {
    const answer = await fetch(url, { signal: AbortSignal.timeout(DISCOVERY_TIMEOUT_MS), redirect: 'error' });
    if (!answer.ok) return { kind: 'unreachable', issuer, problem: `HTTP ${answer.status} from ${url}` };
    metadata = (await answer.json()) as Metadata;
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code;
    return { kind: 'unreachable', issuer, problem: cause ?? (error as Error).name };
  }
  const problems: string[] = [];
  const warnings: string[] = [];
  // OIDC Discovery 4.3: the document's issuer is SESSION_ISSUER (compared as openid-client does), or logins fail.
  if (typeof metadata.issuer !== 'string' || !sameUrl(metadata.issuer, issuer))
    problems.push(`its issuer is ${JSON.stringify(metadata.issuer)}, not SESSION_ISSUER`);
  for (const field of ['authorization_endpoint', 'token_endpoint', 'jwks_uri'])
    if (typeof metadata[field] !== 'string') problems.push(`it names no ${field}`);
  if (!lists(metadata, 'response_types_supported', 'code')) problems.push('it does not offer the code flow');
  if (!lists(metadata, 'code_challenge_methods_supported', 'S256'))
    problems.push('it does not offer PKCE S256');
  const authProblem = clientAuthProblem(metadata, settings.clientAuthMethod);
  if (authProblem) problems.push(authProblem);
  if (!lists(metadata, 'grant_types_supported', 'refresh_token'))
    warnings.push('it lists no refresh_token grant: sessions are never revalidated');
  if (metadata.backchannel_logout_supported !== true)
    warnings.push('no back-channel logout: a logout at the provider does not end gateway sessions');
  if (typeof metadata.end_session_endpoint !== 'string')
    warnings.push('no end_session_endpoint: /bff/logout ends only the gateway session');
  if (hasWebApp(config, settings.clientId) === false)
    problems.push(
      `CLIENTS_FILE has no entry "${settings.clientId}" with "session" (SESSION_CLIENT_ID): every session call is 403`,
    );
  return { kind: 'discovered', issuer, problems, warnings };
}

/**
 * Whether the token endpoint takes the client's authentication: SESSION_CLIENT_AUTH_METHOD when set, else one of the
 * two secret methods the gateway chooses from. A provider that lists no methods takes client_secret_basic (OAuth's
 * default). Without this, every login fails at the token exchange with only "the provider refused the login".
 */
function clientAuthProblem(metadata: Metadata, configured: string | undefined): string | undefined {
  const field = 'token_endpoint_auth_methods_supported';
  const supported = metadata[field];
  if (!Array.isArray(supported)) return undefined;
  const listed = JSON.stringify(supported);
  if (configured)
    return supported.includes(configured)
      ? undefined
      : `its token endpoint does not take SESSION_CLIENT_AUTH_METHOD=${configured} (it lists ${listed})`;
  return supported.includes('client_secret_basic') || supported.includes('client_secret_post')
    ? undefined
    : `its token endpoint takes neither client_secret_basic nor client_secret_post (it lists ${listed})`;
}

/** Undefined when the registry does not load: the client registry step already says why. */
function hasWebApp(config: GatewayConfig, clientId: string): boolean | undefined {
  try {
    const registry = loadClientRegistry(config.callers.clientsFile, {
      logger: { info: () => undefined, error: () => undefined },
      watch: false,
      refuseDevelopmentKey: config.production,
      ssoClients: config.callers.oidc !== undefined,
    });
    const found = registry.findWebApp(clientId) !== undefined;
    registry.close();
    return found;
  } catch {
    return undefined;
  }
}

/** The doctor's step for browser sessions; undefined when they have no configured provider. */
export async function sessionProviderStep(config: GatewayConfig): Promise<DoctorStep | undefined> {
  const check = await checkSessionProvider(config);
  return check && diagnoseSessionProvider(check);
}

export function diagnoseSessionProvider(check: SessionProviderCheck): DoctorStep {
  const title = SESSION_PROVIDER_TITLE;
  if (check.kind === 'unreachable')
    return {
      title,
      state: 'fail',
      detail: `${check.issuer} discovery failed (${check.problem}): no one can log in`,
      fix: "check SESSION_ISSUER (the provider's issuer URL, as its discovery document names it) and egress toward it",
    };
  if (check.problems.length > 0)
    return {
      title,
      state: 'fail',
      detail: `${check.issuer}: ${check.problems.join('; ')}`,
      fix: 'check SESSION_ISSUER, the client registration at the provider and the web app entry in CLIENTS_FILE',
    };
  if (check.warnings.length > 0)
    return {
      title,
      state: 'warn',
      detail: `${check.issuer}: ${check.warnings.join('; ')}`,
      fix: 'enable these at the provider for the client SESSION_CLIENT_ID if your provider offers them',
    };
  return {
    title,
    state: 'pass',
    detail: `${check.issuer}: code + PKCE S256, refresh, back-channel and RP logout`,
  };
}

function sameUrl(a: string, b: string): boolean {
  try {
    return new URL(a).href === new URL(b).href;
  } catch {
    return false;
  }
}
