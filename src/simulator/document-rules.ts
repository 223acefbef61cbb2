// Per-country identity document rules, from the public documentation of each document's issuer.

export type DocumentVerdict =
  | { valid: true }
  | { valid: false; param: 'country' | 'document.type' | 'document.id' };

interface DocumentRule {
  /** What the document is, for the README table. */
  readonly summary: string;
  readonly check: (id: string) => boolean;
}

const digits =
  (min: number, max = min) =>
  (id: string) =>
    new RegExp(`^\\d{${min},${max}}$`).test(id);
const alphanumeric =
  (min: number, max = min) =>
  (id: string) =>
    new RegExp(`^[A-Z0-9Ñ&]{${min},${max}}$`).test(id.toUpperCase());

/** Argentina's CUIT/CUIL/CDI: 11 digits, the last a modulo-11 check digit (10 is never a valid result). */
export function isValidCuit(id: string): boolean {
  if (!/^\d{11}$/.test(id)) return false;
  const weights = [5, 4, 3, 2, 7, 6, 5, 4, 3, 2];
  const sum = weights.reduce((acc, w, i) => acc + w * Number(id[i]), 0);
  const check = 11 - (sum % 11);
  if (check === 10) return false;
  return (check === 11 ? 0 : check) === Number(id[10]);
}

/** Brazil's CPF: 11 digits, two modulo-11 check digits; all-equal digits pass the arithmetic but are invalid. */
export function isValidCpf(id: string): boolean {
  if (!/^\d{11}$/.test(id) || /^(\d)\1{10}$/.test(id)) return false;
  const checkDigit = (length: number) => {
    let sum = 0;
    for (let i = 0; i < length; i += 1) sum += Number(id[i]) * (length + 1 - i);
    const rest = (sum * 10) % 11;
    return rest === 10 ? 0 : rest;
  };
  return checkDigit(9) === Number(id[9]) && checkDigit(10) === Number(id[10]);
}

/** Brazil's CNPJ (numeric form): 14 digits, two modulo-11 check digits. */
export function isValidCnpj(id: string): boolean {
  if (!/^\d{14}$/.test(id) || /^(\d)\1{13}$/.test(id)) return false;
  const checkDigit = (length: number) => {
    // Weights run 2..9 from the right, repeating.
    let sum = 0;
    for (let i = 0; i < length; i += 1) sum += Number(id[length - 1 - i]) * ((i % 8) + 2);
    const rest = sum % 11;
    return rest < 2 ? 0 : 11 - rest;
  };
  return checkDigit(12) === Number(id[12]) && checkDigit(13) === Number(id[13]);
}

/** Chile's RUT/RUN: 7-8 digits and a modulo-11 check digit (0-9 or K). */
export function isValidRut(id: string): boolean {
  const match = /^(\d{7,8})([\dK])$/.exec(id.toUpperCase());
  if (!match) return false;
  const [, body, given] = match as unknown as [string, string, string];
  let sum = 0;
  for (let i = 0; i < body.length; i += 1) sum += Number(body[body.length - 1 - i]) * ((i % 6) + 2);
  const value = 11 - (sum % 11);
  const expected = value === 11 ? '0' : value === 10 ? 'K' : String(value);
  return expected === given;
}

/** Colombia's NIT: 9 digits and a DIAN check digit (prime weights from the right, modulo 11). */
export function isValidNit(id: string): boolean {
  if (!/^\d{10}$/.test(id)) return false;
  const weights = [3, 7, 13, 17, 19, 23, 29, 37, 41];
  let sum = 0;
  for (let i = 0; i < 9; i += 1) sum += Number(id[8 - i]) * weights[i]!;
  const rest = sum % 11;
  return (rest > 1 ? 11 - rest : rest) === Number(id[9]);
}

/** Rules by country (ISO 3166-1 alpha-3) and document type (upper case). */
export const DOCUMENT_RULES: Readonly<Record<string, Readonly<Record<string, DocumentRule>>>> = {
  ARG: {
    CUIT: { summary: '11 digits, modulo-11 check digit', check: isValidCuit },
    CUIL: { summary: '11 digits, modulo-11 check digit', check: isValidCuit },
    CDI: { summary: '11 digits, modulo-11 check digit', check: isValidCuit },
    DNI: { summary: '7 or 8 digits', check: digits(7, 8) },
  },
  BRA: {
    CPF: { summary: '11 digits, two check digits; all-equal digits refused', check: isValidCpf },
    CNPJ: { summary: '14 digits, two check digits', check: isValidCnpj },
  },
  CHL: {
    RUT: { summary: '7-8 digits + modulo-11 check digit (0-9 or K)', check: isValidRut },
    RUN: { summary: '7-8 digits + modulo-11 check digit (0-9 or K)', check: isValidRut },
  },
  COL: {
    CC: { summary: '6-10 digits', check: digits(6, 10) },
    CE: { summary: '6-10 digits', check: digits(6, 10) },
    NIT: { summary: '9 digits + DIAN check digit', check: isValidNit },
  },
  MEX: {
    RFC: { summary: '12 (company) or 13 (person) letters and digits', check: alphanumeric(12, 13) },
    CURP: { summary: '18 letters and digits', check: alphanumeric(18) },
  },
  PER: {
    DNI: { summary: '8 digits', check: digits(8) },
    RUC: { summary: '11 digits', check: digits(11) },
  },
  URY: {
    CI: { summary: '8 digits', check: digits(8) },
    RUT: { summary: '12 digits', check: digits(12) },
  },
};

/** Ids may carry dots, dashes, slashes and spaces (`20-17254359-7`, `11.222.333/0001-81`); they are ignored. */
export function normaliseDocumentId(id: string): string {
  return id.replace(/[.\-/\s]/g, '');
}

/** The provider's verdict on one document; an unknown country or type is an invalid parameter, not an error. */
export function validateDocument(country: string, type: string, id: string): DocumentVerdict {
  const rules = Object.hasOwn(DOCUMENT_RULES, country) ? DOCUMENT_RULES[country] : undefined;
  if (!rules) return { valid: false, param: 'country' };
  const upperType = type.trim().toUpperCase();
  const rule = Object.hasOwn(rules, upperType) ? rules[upperType] : undefined;
  if (!rule) return { valid: false, param: 'document.type' };
  return rule.check(normaliseDocumentId(id)) ? { valid: true } : { valid: false, param: 'document.id' };
}
