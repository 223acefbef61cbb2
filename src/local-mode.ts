// Local mode: the bundled simulator stands in for the provider, a development identity provider and a small web app
// show browser sessions. The only module of src/ that loads src/simulator/ and src/dev-*/.
import { randomBytes } from 'node:crypto';
import { developmentUser, startDevIdentityProvider } from './dev-identity-provider/dev-identity-provider';
import { localWebApp } from './dev-web-app/local-web-app';
import type { LocalSessions, LocalUpstream } from './gateway';
import { startSimulator } from './simulator/simulator';
import { SIMULATOR_DEFAULT_PASSWORD, SIMULATOR_DEFAULT_USERNAME } from './simulator/simulator-config';
import { staticCredentialSource } from './tokens';

/** The second merchant account local mode shows (SPEC §10): its own username and a password new at every start. */
const PRODUCTION_USERNAME = 'production-merchant';

/**
 * Starts the simulator on loopback holding two merchant accounts with different credentials, `sandbox` (the
 * simulator's development pair) and `production`: local mode serves both, as a fleet with an accounts file would.
 */
export async function startLocalUpstream(): Promise<LocalUpstream> {
  const productionPassword = randomBytes(18).toString('base64url');
  const simulator = await startSimulator({
    host: '127.0.0.1',
    port: 0,
    extraAccounts: [{ username: PRODUCTION_USERNAME, password: productionPassword }],
  });
  return {
    baseUrl: simulator.url,
    credentials: staticCredentialSource(SIMULATOR_DEFAULT_USERNAME, SIMULATOR_DEFAULT_PASSWORD),
    accounts: [
      { id: 'sandbox', username: SIMULATOR_DEFAULT_USERNAME, password: SIMULATOR_DEFAULT_PASSWORD },
      { id: 'production', username: PRODUCTION_USERNAME, password: productionPassword },
    ],
    close: () => simulator.close(),
  };
}

/** The web app served at / and the development identity provider, started once the gateway knows its own URL. */
export function localSessions(): LocalSessions {
  return {
    webApp: localWebApp(),
    async startIdentityProvider(gatewayUrl, browser, settings) {
      const user = developmentUser();
      const clientSecret = randomBytes(24).toString('base64url');
      const clientId = settings.clientId;
      const provider = await startDevIdentityProvider({
        users: [user],
        clients: [{ clientId, clientSecret, origin: gatewayUrl }],
      });
      browser.connect({
        issuer: provider.issuer,
        clientId,
        clientSecret,
        publicOrigin: gatewayUrl,
        scopes: settings.scopes,
        endSessionMethod: settings.endSessionMethod,
      });
      return {
        issuer: provider.issuer,
        username: user.username,
        password: user.password,
        close: provider.close,
      };
    },
  };
}
