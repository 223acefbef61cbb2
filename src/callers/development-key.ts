// The development API key of config/clients.local.json: public by design, so production refuses it in any registry.
import { sha256Hex } from '../keys/hash';

/** Printed by local mode and documented in the README: anyone can know it. */
export const DEVELOPMENT_API_KEY = 'local-dev-key';

/** Its registry form (lower-case SHA-256 hex), compared at registry load, never per request. */
export const DEVELOPMENT_KEY_HASH = sha256Hex(DEVELOPMENT_API_KEY);
