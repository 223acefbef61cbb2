// The upstream credentials: inline values, or files (secret mounts) re-read on change and on demand (SIGHUP).
import { type FSWatcher, watch } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import type { CredentialSettings } from '../../config/gateway-config';
import { credentialFingerprint } from './credential-fingerprint';
import type { UpstreamCredentials } from './token-client';

export interface Credentials extends UpstreamCredentials {
  /**
   * A short fingerprint of username and password (an HMAC with a key derived from TOKEN_ENCRYPTION_KEY), stored next
   * to cached tokens and refusals so those of older credentials are recognised and ignored. Truncated on purpose:
   * it tells versions apart, it does not identify.
   */
  readonly fingerprint: string;
}

export type CredentialsListener = (credentials: Credentials) => void;

export interface CredentialSource {
  current(): Credentials;
  /**
   * How many times the credentials changed: what a read compares to know they did not change while it was out (the
   * username alone misses a change and a change back). Counted before the listeners are told.
   */
  changes(): number;
  /** Re-reads the files; resolves true when the credentials changed (listeners have then been told). */
  reload(): Promise<boolean>;
  /** Calls `listener` after every change; returns the function that stops it. */
  onChange(listener: CredentialsListener): () => void;
  /** Stops watching the files. */
  close(): void;
}

export interface CredentialSourceOptions {
  readonly logger: Logger;
  /** Fallback re-read period for file credentials (watch events can be missed). Default 10 s; 0 disables. */
  readonly pollIntervalMs?: number;
  /** Delay that coalesces a burst of watch events (a secret update swaps several files). Default 100 ms. */
  readonly debounceMs?: number;
  /** deriveKey(TOKEN_ENCRYPTION_KEY, 'credential-fingerprint'); absent without an encryption key. */
  readonly fingerprintKey?: Buffer;
}

export function credentialsOf(username: string, password: string, fingerprintKey?: Buffer): Credentials {
  return { username, password, fingerprint: credentialFingerprint(username, password, fingerprintKey) };
}

/** Every listener hears of a change: one that throws is logged, and never keeps the others in the old credentials. */
function tell(
  listener: CredentialsListener,
  changed: Credentials,
  logger: CredentialSourceOptions['logger'],
): void {
  try {
    listener(changed);
  } catch (error) {
    logger.error(
      { event: 'credentials.listener_failed', error: (error as Error)?.name ?? typeof error },
      'a component failed to take the new upstream credentials',
    );
  }
}

/**
 * Files are re-read (not trusted to be stable): Kubernetes updates a secret mount by swapping a `..data`
 * symlink in the directory, so the directory is watched, and a periodic re-read catches what watching misses.
 * A file that is momentarily missing or empty (mid-rotation) keeps the previous credentials.
 */
export async function createCredentialSource(
  settings: CredentialSettings,
  options: CredentialSourceOptions,
): Promise<CredentialSource> {
  const { logger } = options;
  const listeners = new Set<CredentialsListener>();
  const usesFiles = Boolean(settings.usernameFile || settings.passwordFile);

  const readValue = async (
    file: string | undefined,
    inline: string | undefined,
  ): Promise<string | undefined> => (file ? (await readFile(file, 'utf8')).trim() : inline);

  const readAll = async (): Promise<UpstreamCredentials | undefined> => {
    const [username, password] = await Promise.all([
      readValue(settings.usernameFile, settings.username),
      readValue(settings.passwordFile, settings.password),
    ]);
    return username && password ? { username, password } : undefined;
  };

  const first = await readAll();
  let current = first && credentialsOf(first.username, first.password, options.fingerprintKey);
  if (!current) throw new Error('upstream credentials are missing (UPSTREAM_USERNAME / UPSTREAM_PASSWORD)');

  let changes = 0;
  let reading: Promise<boolean> | undefined;
  const reload = (): Promise<boolean> => {
    if (!usesFiles) return Promise.resolve(false);
    reading ??= (async () => {
      try {
        const next = await readAll();
        if (!next) {
          logger.warn(
            { event: 'credentials.reload', result: 'empty' },
            'credential files are empty; keeping the previous credentials',
          );
          return false;
        }
        // Compared as read: the fingerprint is only computed for a change (it may be a slow hash).
        if (next.username === current?.username && next.password === current.password) return false;
        const changed = credentialsOf(next.username, next.password, options.fingerprintKey);
        current = changed;
        changes += 1;
        logger.info({ event: 'credentials.reload', result: 'changed' }, 'upstream credentials changed');
        for (const listener of listeners) tell(listener, changed, logger);
        return true;
      } catch (error) {
        logger.warn(
          { event: 'credentials.reload', result: 'unreadable', code: (error as NodeJS.ErrnoException).code },
          'credential files cannot be read; keeping the previous credentials',
        );
        return false;
      } finally {
        reading = undefined;
      }
    })();
    return reading;
  };

  const stopWatching = usesFiles
    ? watchCredentialFiles([settings.usernameFile, settings.passwordFile], options, () => void reload())
    : undefined;

  return {
    current: () => current as Credentials,
    changes: () => changes,
    reload,
    onChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close() {
      stopWatching?.();
      listeners.clear();
    },
  };
}

/** Calls `changed` (debounced) on events in the files' directories and on every poll; returns how to stop. */
function watchCredentialFiles(
  files: readonly (string | undefined)[],
  options: Pick<CredentialSourceOptions, 'debounceMs' | 'pollIntervalMs'>,
  changed: () => void,
): () => void {
  const watchers: FSWatcher[] = [];
  let debounce: NodeJS.Timeout | undefined;
  let poll: NodeJS.Timeout | undefined;
  const debounceMs = options.debounceMs ?? 100;
  const schedule = () => {
    if (debounce) clearTimeout(debounce);
    debounce = setTimeout(changed, debounceMs);
    debounce.unref();
  };
  const dirs = new Set(files.filter(Boolean).map((f) => dirname(f as string)));
  for (const dir of dirs) {
    try {
      const watcher = watch(dir, { persistent: false }, schedule);
      watcher.on('error', () => undefined);
      watchers.push(watcher);
    } catch {
      // Watching is best effort (some file systems refuse it); the periodic re-read still applies.
    }
  }
  const pollIntervalMs = options.pollIntervalMs ?? 10_000;
  if (pollIntervalMs > 0) {
    poll = setInterval(changed, pollIntervalMs);
    poll.unref();
  }
  return () => {
    for (const watcher of watchers) watcher.close();
    if (debounce) clearTimeout(debounce);
    if (poll) clearInterval(poll);
  };
}

/** A fixed credential pair (tests, local mode with the simulator's development credentials). */
export function staticCredentialSource(
  username: string,
  password: string,
  fingerprintKey?: Buffer,
): CredentialSource {
  const credentials = credentialsOf(username, password, fingerprintKey);
  return {
    current: () => credentials,
    changes: () => 0,
    reload: async () => false,
    onChange: () => () => undefined,
    close: () => undefined,
  };
}
