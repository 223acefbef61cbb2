// The simulator's statement export (GET /api/subscriptions/{id}/statement, a few MiB of CSV) declared in a catalogue
// as an `answer: "stream"` operation, and the same provider path declared as a read (passthrough) for comparison.
import { SHIPPED_CATALOGUE } from './subscription-operation';

const SUBSCRIPTION_ID = {
  name: 'subscriptionId',
  in: 'path',
  required: true,
  schema: { type: 'string', pattern: '^sub_[A-Za-z0-9]{1,32}$' },
};
const KIB = {
  name: 'kib',
  in: 'query',
  required: false,
  schema: { type: 'string', pattern: '^[0-9]{1,5}$' },
};

export function statementOperation(extension: Record<string, unknown> = {}) {
  return {
    operationId: 'statement',
    summary: "Export a subscription's statement (CSV), streamed.",
    'x-gateway': { scope: 'plans:read', answer: 'stream', ...extension },
    parameters: [SUBSCRIPTION_ID, KIB],
    responses: {
      '200': {
        description: 'The statement.',
        content: { 'text/csv': { schema: { type: 'string' } } },
      },
    },
  };
}

/** The shipped catalogue, plus the streamed statement (`extension` on its x-gateway) and the same path read whole. */
export function catalogueWithStatement(extension: Record<string, unknown> = {}): string {
  const document = JSON.parse(SHIPPED_CATALOGUE);
  document.paths['/api/subscriptions/{subscriptionId}/statement'] = { get: statementOperation(extension) };
  document.paths['/api/subscriptions/{subscriptionId}/statement-read'] = {
    get: {
      ...statementOperation(),
      operationId: 'statementRead',
      'x-gateway': {
        scope: 'plans:read',
        answer: 'passthrough',
        upstream: { path: '/api/subscriptions/{subscriptionId}/statement' },
      },
    },
  };
  return JSON.stringify(document, null, 2);
}
