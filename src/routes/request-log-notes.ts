// What the request log says of an operation's valid request, beyond the common fields: a small hook per operation
// name (the catalogue declares operations; only this code knows what of a body is safe to log, and how).
import type { Response } from 'express';
import type { DocumentReference } from '../observability/document-reference';

type Note = (body: unknown, documentReference: DocumentReference) => Response['locals']['document'];

/** By operationId. The validation's document is logged by country, type and keyed reference: never by its id. */
const NOTES: Readonly<Record<string, Note>> = {
  validation: (body, documentReference) => {
    const { country, document } = body as { country: string; document: { id: string; type: string } };
    return { country, type: document.type, ref: documentReference(document.id) };
  },
};

/** The operation's note maker, or undefined (most operations log nothing of their input). */
export function requestLogNote(operationId: string): Note | undefined {
  return Object.hasOwn(NOTES, operationId) ? NOTES[operationId] : undefined;
}
