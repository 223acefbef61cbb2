// Local mode's side of browser sessions: the development identity provider, started once the gateway listens.
import type { RequestHandler } from 'express';
import type { GatewayConfig, SessionSettings } from '../config/gateway-config';
import type { BuiltSessions } from '../sessions';
import { type Built, building } from './lifecycle';

export interface LocalIdentityProvider {
  readonly issuer: string;
  readonly username: string;
  readonly password: string;
  close(): Promise<void>;
}

/** What src/local-mode.ts hands the gateway: it is the only module that loads the development folders. */
export interface LocalSessions {
  /** The small web app served at / that shows browser sessions. */
  readonly webApp: RequestHandler;
  startIdentityProvider(
    gatewayUrl: string,
    browser: BuiltSessions,
    settings: SessionSettings,
  ): Promise<LocalIdentityProvider>;
}

/** Local mode without SESSION_ISSUER: the development provider becomes the sessions' provider. */
export function startLocalIdentityProvider(
  config: GatewayConfig,
  gatewayUrl: string,
  browser: BuiltSessions | undefined,
  local: { readonly localSessions?: LocalSessions },
): Promise<Built<LocalIdentityProvider | undefined>> {
  return building(async (closers) => {
    const settings = config.sessions;
    if (!browser || !settings || settings.issuer || !local.localSessions) return undefined;
    const provider = await local.localSessions.startIdentityProvider(gatewayUrl, browser, settings);
    closers.push(() => provider.close());
    return provider;
  });
}
