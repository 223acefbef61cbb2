// A loopback OTLP/HTTP traces receiver: keeps every POST /v1/traces body (OTLP JSON, the HTTP exporter's encoding).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type OtlpValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean };

/** One span as OTLP JSON carries it (ids in hex). */
export interface ExportedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly name: string;
  /** 1 internal, 2 server, 3 client. */
  readonly kind: number;
  readonly attributes?: { key: string; value: OtlpValue }[];
  readonly status?: { code?: number };
  /** The service.name of the resource that exported it. */
  readonly service: string;
}

export interface OtlpReceiver {
  /** The base endpoint, as OTEL_EXPORTER_OTLP_ENDPOINT takes it. */
  readonly endpoint: string;
  /** Every export body received, as text. */
  bodies(): string[];
  spans(): ExportedSpan[];
  close(): Promise<void>;
}

interface ExportBody {
  resourceSpans?: {
    resource?: { attributes?: { key: string; value: OtlpValue }[] };
    scopeSpans?: { spans?: Omit<ExportedSpan, 'service'>[] }[];
  }[];
}

/** `status`: what every export is answered (200 by default; 401 plays a collector refusing the API key). */
export async function startOtlpReceiver(options: { status?: number } = {}): Promise<OtlpReceiver> {
  const status = options.status ?? 200;
  const bodies: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      bodies.push(Buffer.concat(chunks).toString('utf8'));
      res.writeHead(status, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    bodies: () => [...bodies],
    spans: () =>
      bodies.flatMap((text) =>
        ((JSON.parse(text) as ExportBody).resourceSpans ?? []).flatMap((resourceSpans) => {
          const service = String(
            resourceSpans.resource?.attributes?.find((a) => a.key === 'service.name')?.value.stringValue,
          );
          return (resourceSpans.scopeSpans ?? []).flatMap((scope) =>
            (scope.spans ?? []).map((span) => ({ ...span, service })),
          );
        }),
      ),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The value of a span attribute (OTLP JSON carries int64 as a string). */
export function attribute(span: ExportedSpan, key: string): string | number | boolean | undefined {
  const value = span.attributes?.find((a) => a.key === key)?.value;
  if (!value) return undefined;
  if (value.intValue !== undefined) return Number(value.intValue);
  return value.stringValue ?? value.boolValue;
}
