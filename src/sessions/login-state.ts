// A login in progress: its PKCE verifier, nonce and return path, stored server-side under its state, usable once.
import { z } from 'zod';
import { sha256Base64Url } from '../keys/hash';
import { sessionKeys } from '../keys/redis-keys';
import type { RecordSeal, TokenStore } from '../tokens';
import { schemaParser } from './random-values';

const pendingSchema = z.strictObject({
  codeVerifier: z.string().min(43),
  nonce: z.string().min(1),
  returnTo: z.string().startsWith('/'),
  /** SHA-256 of the login cookie's value: only the browser that started the login can finish it. */
  binding: z.string().min(1),
});

export type PendingLogin = z.infer<typeof pendingSchema>;
const parsePending = schemaParser(pendingSchema);

/** How long a user has to finish logging in at the provider. */
export const LOGIN_TTL_SECONDS = 600;

export interface LoginStates {
  save(state: string, pending: PendingLogin): Promise<void>;
  /** The pending login of `state`, removed atomically: a second callback with the same state finds nothing. */
  take(state: string): Promise<PendingLogin | undefined>;
}

export const bindingOf = sha256Base64Url;

export function createLoginStates(store: TokenStore, seal: RecordSeal, keyPrefix: string): LoginStates {
  const login = sessionKeys(keyPrefix).login;
  const keyOf = (state: string) => login(bindingOf(state));
  return {
    async save(state, pending) {
      const key = keyOf(state);
      await store.set(key, seal.seal(JSON.stringify(pending), key), LOGIN_TTL_SECONDS * 1000);
    },
    async take(state) {
      const key = keyOf(state);
      const raw = await store.get(key);
      if (raw === undefined || !(await store.compareAndDelete(key, raw))) return undefined;
      return seal.open('login_state', raw, key, parsePending);
    },
  };
}
