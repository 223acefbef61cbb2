// The leak scan: no upstream password, API key, encryption key or JWT in anything a test captured (logs,
// answers, /metrics). A failure names where the leak is and which secret, never the secret itself.

/** A captured text and where it came from (e.g. "replica 2 stdout", "answer body #17"). */
export interface LabelledText {
  readonly where: string;
  readonly text: string;
}

/** A secret and a name to report it by. */
export interface NamedSecret {
  readonly name: string;
  readonly value: string;
}

/** Anything shaped like a signed JWT (header.payload.signature, base64url, header starting with `{"`). */
export const JWT_PATTERN = /eyJ[\w-]+\.[\w-]+\.[\w-]+/;

/** A secret as it may appear in a text: verbatim, JSON-escaped, or percent-encoded. */
function formsOf(value: string): string[] {
  return [...new Set([value, JSON.stringify(value).slice(1, -1), encodeURIComponent(value)])];
}

function position(text: string, index: number): string {
  const before = text.slice(0, index);
  const line = before.split('\n').length;
  const column = index - before.lastIndexOf('\n');
  return `line ${line}, column ${column}`;
}

/** Every leak found, described without the secret's value (empty when clean). */
export function findSecrets(
  texts: readonly (string | LabelledText)[],
  secrets: readonly (string | NamedSecret)[],
): string[] {
  const named = secrets.map((secret, i) =>
    typeof secret === 'string' ? { name: `secret #${i + 1}`, value: secret } : secret,
  );
  for (const secret of named) {
    // A short "secret" would match by chance and make the scan meaningless.
    if (secret.value.length < 8) throw new Error(`leak scan: ${secret.name} is too short to scan for`);
  }
  const findings: string[] = [];
  texts.forEach((entry, i) => {
    const { where, text } = typeof entry === 'string' ? { where: `text #${i + 1}`, text: entry } : entry;
    for (const secret of named) {
      for (const form of formsOf(secret.value)) {
        const at = text.indexOf(form);
        if (at >= 0) {
          findings.push(`${secret.name} appears in ${where} (${position(text, at)})`);
          break;
        }
      }
    }
    const jwt = JWT_PATTERN.exec(text);
    if (jwt) findings.push(`a JWT-looking string appears in ${where} (${position(text, jwt.index)})`);
  });
  return findings;
}

/** Throws naming every place a secret or a JWT appears; the message never contains a secret. */
export function assertNoSecrets(
  texts: readonly (string | LabelledText)[],
  secrets: readonly (string | NamedSecret)[],
): void {
  const findings = findSecrets(texts, secrets);
  if (findings.length > 0) {
    throw new Error(`leak scan failed (${findings.length}):\n  ${findings.slice(0, 50).join('\n  ')}`);
  }
}
