// `npm run client-key -- <clientId> [scopes...]`: a new random API key (shown once) and the registry entry to paste.
import { randomBytes } from 'node:crypto';
import { SCOPE_PATTERN } from '../catalogue';
import { sha256Hex } from '../keys/hash';
import { SCOPES } from './caller';
import { CLIENT_ID_PATTERN, type ClientEntry } from './registry-schema';

export const KEY_PREFIX = 'pbk_';

export const USAGE = `Usage: npm run client-key -- <clientId> [scope...]

Prints a new random API key for <clientId> (shown once: hand it to the client's secret store)
and the client registry entry to add to CLIENTS_FILE, which holds only the key's SHA-256.

  clientId  1-64 letters, digits, ".", "_" or "-", starting with a letter or digit
  scope     one or more scopes of the operations catalogue (default: ${SCOPES.join(' ')})

To rotate the key of an existing client, append the printed "sha256:..." to its "keys", deploy,
move the client to the new key, then remove the old hash.`;

export interface ClientKey {
  /** The secret: `pbk_` and 32 random bytes in base64url. */
  readonly key: string;
  readonly entry: ClientEntry;
}

export class UsageError extends Error {}

/** Validates the arguments and makes a key; throws UsageError on a bad client id or scope. */
export function createClientKey(
  clientId: string,
  scopes: readonly string[],
  random: (size: number) => Buffer = randomBytes,
): ClientKey {
  if (!CLIENT_ID_PATTERN.test(clientId)) {
    throw new UsageError(`invalid client id "${clientId}": 1-64 letters, digits, ".", "_" or "-"`);
  }
  const malformed = scopes.filter((scope) => !SCOPE_PATTERN.test(scope));
  if (malformed.length > 0)
    throw new UsageError(`malformed scope ${malformed.map((s) => `"${s}"`).join(', ')}`);
  const key = `${KEY_PREFIX}${random(32).toString('base64url')}`;
  const chosen = scopes.length > 0 ? [...new Set(scopes)] : [...SCOPES];
  return { key, entry: { id: clientId, keys: [`sha256:${sha256Hex(key)}`], scopes: chosen } };
}

export interface CliIo {
  out(text: string): void;
  err(text: string): void;
}

/** The whole CLI as a function of its arguments; returns the exit code (0 done, 2 usage error). */
export function runClientKeyCli(
  args: readonly string[],
  io: CliIo,
  random?: (size: number) => Buffer,
): number {
  if (args.includes('--help') || args.includes('-h')) {
    io.out(USAGE);
    return 0;
  }
  const [clientId, ...scopes] = args;
  if (clientId === undefined || clientId.startsWith('-')) {
    io.err(USAGE);
    return 2;
  }
  let created: ClientKey;
  try {
    created = createClientKey(clientId, scopes, random);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.err(`client-key: ${error.message}\n\n${USAGE}`);
    return 2;
  }
  io.out(
    [
      `API key for client "${clientId}" (shown only now; store it in the client's secret manager):`,
      '',
      `  ${created.key}`,
      '',
      'Entry to add to the "clients" array of CLIENTS_FILE (optional: "rateLimit", "origins"):',
      '',
      JSON.stringify(created.entry, null, 2),
    ].join('\n'),
  );
  return 0;
}

if (require.main === module) {
  process.exitCode = runClientKeyCli(process.argv.slice(2), {
    out: (text) => process.stdout.write(`${text}\n`),
    err: (text) => process.stderr.write(`${text}\n`),
  });
}
