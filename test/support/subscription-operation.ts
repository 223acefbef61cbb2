// The simulator's third operation (GET /api/subscriptions/{id}) as an operator declares it in the catalogue at run
// time: a path parameter, a declared query parameter, and a response schema that leaves the provider's riskScore out.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export const SHIPPED_CATALOGUE = readFileSync(join(__dirname, '../../config/operations.json'), 'utf8');

export const SUBSCRIPTION_OPERATION = {
  operationId: 'subscription',
  summary: 'Read a subscription.',
  'x-gateway': { scope: 'plans:read' },
  parameters: [
    {
      name: 'subscriptionId',
      in: 'path',
      required: true,
      schema: { type: 'string', pattern: '^sub_[A-Za-z0-9]{1,32}$' },
    },
    { name: 'include', in: 'query', required: false, schema: { type: 'string', enum: ['plan'] } },
  ],
  responses: {
    '200': {
      description: 'A subscription.',
      content: {
        'application/json': {
          schema: {
            type: 'object',
            properties: {
              id: { type: 'string' },
              planId: { type: 'string' },
              status: { type: 'string' },
              startedAt: { type: 'string' },
              nextChargeAt: { type: ['string', 'null'] },
            },
            required: ['id', 'planId', 'status'],
          },
        },
      },
    },
  },
};

/** The shipped catalogue plus the subscription read. */
export function catalogueWithSubscriptions(): string {
  const document = JSON.parse(SHIPPED_CATALOGUE);
  document.paths['/api/subscriptions/{subscriptionId}'] = { get: SUBSCRIPTION_OPERATION };
  return JSON.stringify(document, null, 2);
}
