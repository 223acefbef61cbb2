// The provider path of an operation: a template checked at load (never another host, never out of its place), filled
// per request from validated path parameters, each encoded as one segment.

/** A template's parts: literal text, or the name of a path parameter. */
type Part = string | { readonly param: string };

const PARAM = /^\{([A-Za-z_][A-Za-z0-9_]*)\}$/;
const LITERAL_SEGMENT = /^[A-Za-z0-9._~-]+$/;

export interface UpstreamPath {
  readonly params: readonly string[];
  /** The path for these (validated) parameter values; a value `.` or `..` is refused by the caller first. */
  fill(values: Readonly<Record<string, unknown>>): string;
}

/**
 * Parses `/api/x/{id}`: segments are plain characters or one `{name}` each; `.`/`..` segments, `//`, a scheme, a
 * query or a fragment are refused (a problem sentence), so no filled template leaves the account's base URL.
 */
export function parsePathTemplate(template: string): UpstreamPath | string {
  if (!template.startsWith('/') || template.startsWith('//'))
    return 'must be a path starting with one / (never a URL or another host)';
  const parts: Part[] = [];
  const params: string[] = [];
  const segments = template.slice(1).split('/');
  for (const [index, segment] of segments.entries()) {
    const param = PARAM.exec(segment);
    if (param?.[1]) {
      parts.push('/', { param: param[1] });
      params.push(param[1]);
      continue;
    }
    if (segment === '' && index === segments.length - 1 && index > 0) {
      parts.push('/');
      continue;
    }
    if (segment === '.' || segment === '..') return 'must not contain . or .. segments';
    if (!LITERAL_SEGMENT.test(segment))
      return `segment ${JSON.stringify(segment)} must be letters, digits and . _ ~ - or one {parameter}`;
    parts.push(`/${segment}`);
  }
  const merged: Part[] = [];
  for (const part of parts) {
    const last = merged.at(-1);
    if (typeof part === 'string' && typeof last === 'string') merged[merged.length - 1] = last + part;
    else merged.push(part);
  }
  return {
    params,
    fill(values) {
      let path = '';
      for (const part of merged)
        path += typeof part === 'string' ? part : encodeURIComponent(String(values[part.param]));
      return path;
    },
  };
}

/** The Express route of an OpenAPI path template (`/plan/{id}` → `/plan/:id`). */
export function expressPath(template: string): string {
  return template.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, ':$1');
}
