// What tests of browser sessions against a real development provider share: its users, the web app's clients file,
// and the environment of a gateway whose sessions use that provider and whose upstream is the simulator.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DevUser } from '../../src/dev-identity-provider/dev-identity-provider';
import { tempDir } from './temp-dir';

/** A development user with a password of its own (random per call: keep the user, not its sub, to log in again). */
export function devUser(sub: string, groups: string[], name = sub): DevUser {
  return {
    username: sub,
    password: `${sub}-password-${randomBytes(6).toString('hex')}`,
    sub,
    name,
    email: `${sub}@example.test`,
    groups,
  };
}

/** A clients file holding the one web app of browser sessions (no API keys); its path. */
export function webAppClientsFile(webApp: { readonly id: string } & Record<string, unknown>): string {
  const file = join(tempDir('bff-web-app-'), 'clients.json');
  writeFileSync(file, JSON.stringify({ clients: [{ keys: [], ...webApp }] }));
  return file;
}

export interface SessionGatewaySettings {
  readonly simulatorUrl: string;
  readonly clientsFile: string;
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
  /** The gateway's public origin, the one the provider's client redirects to. */
  readonly publicUrl: string;
}

/** The environment of a gateway with browser sessions at `issuer` and the simulator upstream. */
export function sessionGatewayEnv(settings: SessionGatewaySettings): Record<string, string> {
  return {
    UPSTREAM_BASE_URL: settings.simulatorUrl,
    UPSTREAM_ALLOW_HTTP: 'true',
    UPSTREAM_USERNAME: 'sandbox-merchant',
    UPSTREAM_PASSWORD: 'sandbox-password',
    CLIENTS_FILE: settings.clientsFile,
    SESSION_ISSUER: settings.issuer,
    SESSION_CLIENT_ID: settings.clientId,
    SESSION_CLIENT_SECRET: settings.clientSecret,
    SESSION_PUBLIC_URL: settings.publicUrl,
  };
}
