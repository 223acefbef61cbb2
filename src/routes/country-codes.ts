// The ISO 3166-1 alpha-3 country codes, from a maintained list (i18n-iso-countries), for input validation.
// The package's `index` entry holds the codes alone: its default entry also loads ~700 KB of country names.
import { getAlpha3Codes } from 'i18n-iso-countries/index';

/** Every assigned alpha-3 code, sorted (ARG, BRA, …): a typo such as `ARQ` or `XXX` is not in it. */
export const ALPHA3_COUNTRY_CODES = Object.keys(getAlpha3Codes()).sort() as [string, ...string[]];
