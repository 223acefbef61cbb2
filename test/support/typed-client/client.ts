// A client as a calling team writes it: openapi-fetch over the types openapi-typescript generates from the gateway's
// served /openapi.json (into ./generated, at test time). Every read goes through those types, so a document change
// that breaks them fails `tsc -p test/support/typed-client` (test/integration/routes/openapi-client.test.ts).
import createClient from 'openapi-fetch';
import type { components, paths } from './generated/gateway-api';

type PlanResponses = paths['/api/subscriptions/plan/{internalId}']['get']['responses'];
/** A header the document declares (never, so nothing compiles, when only the catch-all `[name: string]` has it). */
type DeclaredHeader<H, K extends keyof H> = unknown extends H[K] ? never : NonNullable<H[K]>;
type RetryAfter = DeclaredHeader<PlanResponses[429]['headers'], 'Retry-After'>;
type GatewayError = components['schemas']['ErrorEnvelope'];
type ProviderError = components['schemas']['UpstreamError'];

/** What the gateway said, as a caller reads it. */
export type PlanReading =
  | { kind: 'plan'; name: string; amount: number; everyHours: number }
  | { kind: 'gateway-error'; status: number; reason: string; requestId: string; fields: string[] }
  | { kind: 'provider-error'; status: number; detail: string }
  | { kind: 'rate-limited'; retryAfter: RetryAfter; reason: string };

export function gatewayClient(baseUrl: string, apiKey: string) {
  const client = createClient<paths>({ baseUrl, headers: { 'X-API-Key': apiKey } });

  /** Tells the gateway's envelope (it has a requestId) from the provider's own body passed through. */
  const readError = (status: number, error: GatewayError | ProviderError): PlanReading =>
    'requestId' in error
      ? {
          kind: 'gateway-error',
          status,
          reason: error.status.description,
          requestId: error.requestId,
          fields: (error.errors ?? []).map((field) => `${field.path}: ${field.message}`),
        }
      : { kind: 'provider-error', status, detail: error.status.detail };

  return {
    async readPlan(internalId: string): Promise<PlanReading> {
      const { data, error, response } = await client.GET('/api/subscriptions/plan/{internalId}', {
        params: { path: { internalId } },
      });
      if (data) {
        const plan: components['schemas']['SubscriptionPlan'] = data;
        return {
          kind: 'plan',
          name: plan.name,
          amount: plan.amount,
          everyHours: plan.autoRecurring.frequency,
        };
      }
      if (response.status === 429) {
        const retryAfter: RetryAfter = response.headers.get('Retry-After') ?? '';
        return { kind: 'rate-limited', retryAfter, reason: error.status.description };
      }
      return readError(response.status, error);
    },

    async validate(body: components['schemas']['DocumentValidationRequest']) {
      const { data, error, response } = await client.POST('/api/validation/document', { body });
      if (data) return { valid: data.code === '200', description: data.description };
      return readError(response.status, error);
    },
  };
}
