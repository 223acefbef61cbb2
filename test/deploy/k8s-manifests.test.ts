// Renders each kustomize overlay, validates every object against the Kubernetes API schema and checks the
// production habits of the deployment (issue 10): rollout, probes, security context, secrets as files only.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, posix, relative } from 'node:path';
import { Deployment, type IDeployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler, type IHorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import {
  type INetworkPolicy,
  type INetworkPolicyPeer,
  NetworkPolicy,
} from 'kubernetes-models/networking.k8s.io/v1';
import { type IPodDisruptionBudget, PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import {
  ConfigMap,
  type IConfigMap,
  type IContainer,
  type IPodSpec,
  type IService,
  Namespace,
  Service,
} from 'kubernetes-models/v1';
import { parse, parseAllDocuments } from 'yaml';
import { ACCOUNT_ID_PATTERN } from '../../src/config/account-spec';
import { accountsFileOptionsOf, readAccountsFile } from '../../src/config/accounts-file';
import { loadConfig } from '../../src/config/load-config';
import { durabilityOfServerSettings, judgeDurability } from '../../src/store/redis-durability';
import { tempDir } from '../support/temp-dir';

const ROOT = join(__dirname, '..', '..');
const K8S_DIR = join(ROOT, 'deploy', 'k8s');
const OVERLAYS = ['sandbox', 'production'] as const;
type Overlay = (typeof OVERLAYS)[number];

/** Another kubectl can be tried with KUBECTL=/path/to/kubectl (e.g. Debian's 1.20 with kustomize v2.0.3). */
const KUBECTL = process.env.KUBECTL || 'kubectl';

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

type ModelClass = new (data: never) => { validate(): void };

/** The only kinds a rendered overlay may hold, each with the model that validates it against the API schema. */
const MODELS: Record<string, ModelClass> = {
  'v1/Namespace': Namespace,
  'v1/ConfigMap': ConfigMap,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
};

/** Secrets the gateway reads from NAME_FILE; NAME itself must never be set in a manifest (files rotate, env does not). */
const SECRET_VARIABLES = ['UPSTREAM_USERNAME', 'UPSTREAM_PASSWORD', 'TOKEN_ENCRYPTION_KEY', 'REDIS_PASSWORD'];
const REQUIRED_FILE_VARIABLES = ['TOKEN_ENCRYPTION_KEY_FILE'];

/** The fields an account of UPSTREAM_ACCOUNTS_FILE may have (SPEC §10). */
const ACCOUNT_FIELDS = new Set([
  'id',
  'baseUrl',
  'usernameFile',
  'passwordFile',
  'caFile',
  'staticHeaders',
  'localAddress',
  'maxSockets',
  'timeoutMs',
  'budget',
]);

interface AccountEntry {
  readonly id: string;
  readonly baseUrl: string;
  readonly usernameFile: string;
  readonly passwordFile: string;
  readonly [field: string]: unknown;
}

/** Kustomization fields that kustomize v2.0.3 (Debian's kubectl 1.20) and v5 both read and render alike. */
const PORTABLE_KUSTOMIZATION_FIELDS = new Set([
  'apiVersion',
  'kind',
  'namespace',
  'bases',
  'resources',
  'images',
  'patchesStrategicMerge',
  'configMapGenerator',
  'generatorOptions',
]);

/** Things that look like a credential written into a file. */
const SECRET_PATTERNS: [string, RegExp][] = [
  ['a JWT', /eyJ[\w-]{8,}\.[\w-]{8,}\./],
  ['a base64 32-byte key', /(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{43}=(?![A-Za-z0-9+/=])/],
  ['a PEM private key', /-----BEGIN [A-Z ]*PRIVATE KEY-----/],
  ['credentials in a URL', /\b[a-z][a-z0-9+.-]*:\/\/[^\s/:@"']+:[^\s/@"']+@/i],
  [
    'a password/secret/token assignment',
    /\b(?:password|passwd|secret|token|api[_-]?key)[ \t]*[:=][ \t]*["']?(?![/.$<{(`"']|\w+_FILE\b)[^\s"',`]{6,}/i,
  ],
];

function render(overlay: Overlay): string {
  try {
    return execFileSync(KUBECTL, ['kustomize', join(K8S_DIR, 'overlays', overlay)], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (error) {
    const failure = error as NodeJS.ErrnoException & { stderr?: string };
    if (failure.code === 'ENOENT') {
      throw new Error(
        `\`${KUBECTL}\` is not on the PATH. These tests render the kustomize overlays with \`kubectl kustomize\`. ` +
          'Install it with `apt-get install -y kubernetes-client` (Debian, provides kubectl) or `apt-get install -y kubectl` ' +
          '(Kubernetes apt repository); `npm test` does this for you when run as root.',
      );
    }
    throw new Error(
      `kubectl kustomize deploy/k8s/overlays/${overlay} failed:\n${failure.stderr ?? failure.message}`,
    );
  }
}

function parseObjects(text: string): K8sObject[] {
  return parseAllDocuments(text)
    .filter((doc) => doc.contents !== null)
    .map((doc) => {
      if (doc.errors.length > 0) throw new Error(`rendered YAML does not parse: ${doc.errors[0]?.message}`);
      return doc.toJS() as K8sObject;
    });
}

/** Every string in a YAML/JSON value, with its path, for the secret scan. */
function* strings(value: unknown, path = ''): Generator<[string, string]> {
  if (typeof value === 'string') yield [path, value];
  else if (Array.isArray(value))
    for (const [i, item] of value.entries()) yield* strings(item, `${path}[${i}]`);
  else if (value && typeof value === 'object')
    for (const [key, item] of Object.entries(value)) yield* strings(item, path ? `${path}.${key}` : key);
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

function secretFindings(text: string): string[] {
  return SECRET_PATTERNS.filter(([, pattern]) => pattern.test(text)).map(([what]) => what);
}

/** The Kubernetes rule for a pod's label selector: every matchLabels pair is on the pod. */
function selects(
  selector: Record<string, string> | undefined,
  labels: Record<string, string> | undefined,
): boolean {
  if (!selector || Object.keys(selector).length === 0) return false;
  return Object.entries(selector).every(([key, value]) => labels?.[key] === value);
}

function isInside(file: string, directory: string): boolean {
  const rel = posix.relative(directory, file);
  return rel !== '' && !rel.startsWith('..') && !posix.isAbsolute(rel);
}

interface Rendered {
  text: string;
  objects: K8sObject[];
  deployment: IDeployment;
  pod: IPodSpec;
  container: IContainer;
  env: Record<string, string>;
}

const rendered = new Map<Overlay, Rendered>();

function get(overlay: Overlay): Rendered {
  const cached = rendered.get(overlay);
  if (cached) return cached;
  const text = render(overlay);
  const objects = parseObjects(text);
  const deployments = objects.filter((o) => o.kind === 'Deployment');
  if (deployments.length !== 1)
    throw new Error(`${overlay}: expected one Deployment, found ${deployments.length}`);
  const deployment = deployments[0] as unknown as IDeployment;
  const pod = deployment.spec?.template.spec as IPodSpec;
  const container = pod.containers.find((c) => c.name === 'gateway') ?? pod.containers[0];
  if (!container) throw new Error(`${overlay}: the Deployment has no container`);
  const env: Record<string, string> = {};
  for (const variable of container.env ?? [])
    if (variable.value !== undefined) env[variable.name] = variable.value;
  const result = { text, objects, deployment, pod, container, env };
  rendered.set(overlay, result);
  return result;
}

function all<T>(overlay: Overlay, kind: string): T[] {
  return get(overlay).objects.filter((o) => o.kind === kind) as unknown as T[];
}

function containerPort(container: IContainer, port: number | string | undefined): number | undefined {
  if (typeof port === 'number') return port;
  return container.ports?.find((p) => p.name === port)?.containerPort;
}

/** The accounts file as the overlay's ConfigMap holds it, found through UPSTREAM_ACCOUNTS_FILE and its mount. */
function accountsOf(overlay: Overlay): AccountEntry[] {
  const { pod, container, env } = get(overlay);
  const file = env.UPSTREAM_ACCOUNTS_FILE as string;
  const mount = container.volumeMounts?.find((m) => isInside(file, m.mountPath));
  const configMapName = pod.volumes?.find((v) => v.name === mount?.name)?.configMap?.name;
  const configMap = all<IConfigMap>(overlay, 'ConfigMap').find((c) => c.metadata?.name === configMapName);
  const parsed = JSON.parse(configMap?.data?.[posix.basename(file)] ?? 'null') as {
    accounts?: AccountEntry[];
  } | null;
  return parsed?.accounts ?? [];
}

/** The Secret volume (and key) a file path of the pod lands in, or undefined when it is not a mounted Secret key. */
function secretKeyOf(overlay: Overlay, file: string): { secretName: string; key: string } | undefined {
  const { pod, container } = get(overlay);
  const mount = container.volumeMounts?.find((m) => isInside(file, m.mountPath));
  if (!mount || mount.subPath !== undefined) return undefined;
  const secret = pod.volumes?.find((v) => v.name === mount.name)?.secret;
  if (!secret?.secretName) return undefined;
  const key = posix.relative(mount.mountPath, file);
  if (key.includes('/') || (secret.items && !secret.items.some((i) => i.path === key))) return undefined;
  return { secretName: secret.secretName, key };
}

describe.each(OVERLAYS)('the %s overlay', (overlay) => {
  test('renders with kubectl kustomize into schema-valid objects of known kinds only', () => {
    const { objects } = get(overlay);
    expect(objects.length).toBeGreaterThan(0);
    for (const object of objects) {
      const id = `${object.apiVersion}/${object.kind}`;
      const Model = MODELS[id];
      if (!Model)
        throw new Error(`${overlay}: unexpected kind ${id} (${object.metadata?.name}); add it to MODELS`);
      try {
        new Model(object as never).validate();
      } catch (error) {
        throw new Error(
          `${overlay}: ${id} ${object.metadata.name} is not valid: ${(error as Error).message}`,
        );
      }
      if (object.kind !== 'Namespace') expect(object.metadata.namespace).toBe(`payments-bff-${overlay}`);
    }
  });

  test('leaves the replica count to the HPA, rolls out without unavailability and spreads over zones and nodes', () => {
    const { deployment, pod } = get(overlay);
    // A `replicas:` beside the HPA would shrink a grown fleet on every apply.
    expect(deployment.spec?.replicas).toBeUndefined();
    expect(deployment.metadata?.annotations?.['ignore-check.kube-linter.io/minimum-three-replicas']).toMatch(
      /HorizontalPodAutoscaler/,
    );
    expect(deployment.spec?.strategy?.type).toBe('RollingUpdate');
    expect(deployment.spec?.strategy?.rollingUpdate?.maxUnavailable).toBe(0);
    expect(Number(deployment.spec?.strategy?.rollingUpdate?.maxSurge)).toBeGreaterThanOrEqual(1);
    const podLabels = deployment.spec?.template.metadata?.labels;
    expect(selects(deployment.spec?.selector.matchLabels, podLabels)).toBe(true);
    const spread = pod.topologySpreadConstraints ?? [];
    expect(spread.map((c) => c.topologyKey).sort()).toEqual([
      'kubernetes.io/hostname',
      'topology.kubernetes.io/zone',
    ]);
    for (const constraint of spread) {
      expect(selects(constraint.labelSelector?.matchLabels, podLabels)).toBe(true);
      // Nodes the pods cannot run on (tainted, cordoned) must not count with their 0 replicas.
      expect({ [constraint.topologyKey]: constraint.nodeTaintsPolicy }).toEqual({
        [constraint.topologyKey]: 'Honor',
      });
    }
    const byKey = (key: string) => spread.find((c) => c.topologyKey === key);
    expect(byKey('kubernetes.io/hostname')?.whenUnsatisfiable).toBe('DoNotSchedule');
    expect(byKey('topology.kubernetes.io/zone')?.whenUnsatisfiable).toBe('ScheduleAnyway');
  });

  test('a 3-node rollout with a surge pod fits the node spread once tainted nodes are left out', () => {
    const { deployment, pod } = get(overlay);
    const [hpa] = all<IHorizontalPodAutoscaler>(overlay, 'HorizontalPodAutoscaler');
    const hostname = pod.topologySpreadConstraints?.find((c) => c.topologyKey === 'kubernetes.io/hostname');
    const maxSkew = hostname?.maxSkew ?? 0;
    const surge = Number(deployment.spec?.strategy?.rollingUpdate?.maxSurge);
    // Three schedulable nodes holding minReplicas, and one tainted control-plane node with none.
    const schedulable = [0, 0, 0];
    for (let i = 0; i < (hpa?.spec?.minReplicas ?? 0); i++)
      schedulable[i % 3] = (schedulable[i % 3] ?? 0) + 1;
    const counted = hostname?.nodeTaintsPolicy === 'Honor' ? schedulable : [...schedulable, 0];
    // The scheduler's rule: a node fits when its count + 1 - the global minimum <= maxSkew.
    const fits = (counts: number[]) =>
      schedulable.some((count) => count + 1 - Math.min(...counts) <= maxSkew);
    for (let pod = 0; pod < surge; pod++) expect(fits(counted)).toBe(true);
    // The same rule with the tainted node counted is what stalled rollouts before (Ignore, the default).
    expect(fits([...schedulable, 0])).toBe(false);
  });

  test('probes liveness on /healthz and readiness on /readyz at the port the gateway listens on', () => {
    const { container, env } = get(overlay);
    const port = Number(env.PORT ?? 8080);
    expect(container.ports?.some((p) => p.containerPort === port)).toBe(true);
    expect(container.livenessProbe?.httpGet?.path).toBe('/healthz');
    expect(containerPort(container, container.livenessProbe?.httpGet?.port)).toBe(port);
    expect(container.readinessProbe?.httpGet?.path).toBe('/readyz');
    expect(containerPort(container, container.readinessProbe?.httpGet?.port)).toBe(port);
    if (container.startupProbe) expect(container.startupProbe.httpGet?.path).toBe('/healthz');
  });

  test('pauses in preStop and gives the pod time to drain before it is killed', () => {
    const { container, pod, env } = get(overlay);
    const preStop = container.lifecycle?.preStop;
    const command = preStop?.exec?.command ?? [];
    const pauseSeconds = preStop?.sleep
      ? preStop.sleep.seconds
      : command[0] === 'sleep'
        ? Number(command[1])
        : Number.NaN;
    expect(pauseSeconds).toBeGreaterThan(0);
    const shutdownSeconds = Number(env.SHUTDOWN_TIMEOUT_MS ?? 15000) / 1000;
    // A provider call still out after the drain ends with its answer or its own timeout before the ledger's last write.
    const providerCallSeconds =
      (Number(env.UPSTREAM_QUEUE_TIMEOUT_MS ?? 1000) + Number(env.UPSTREAM_TIMEOUT_MS ?? 10000)) / 1000;
    // The grace period starts with preStop; SIGTERM (and the gateway's bounded drain) comes after it.
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(
      pauseSeconds + shutdownSeconds + providerCallSeconds,
    );
  });

  test("runs the image's CMD (its runtime flags, docs/operations.md): no command or args of its own", () => {
    const { container } = get(overlay);
    expect(container.command).toBeUndefined();
    expect(container.args).toBeUndefined();
  });

  test('sets resource requests and limits', () => {
    const { resources } = get(overlay).container;
    expect(resources?.requests?.cpu).toBeDefined();
    expect(resources?.requests?.memory).toBeDefined();
    expect(resources?.limits?.memory).toBeDefined();
    expect(resources?.limits?.cpu).toBeDefined();
  });

  test('runs locked down: non-root, read-only root filesystem, no capabilities, no escalation, no API token', () => {
    const { pod, container } = get(overlay);
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.securityContext?.runAsNonRoot).toBe(true);
    expect(pod.securityContext?.runAsUser).toBe(10001);
    expect(pod.securityContext?.seccompProfile?.type).toBe('RuntimeDefault');
    const context = container.securityContext;
    expect(context?.runAsNonRoot ?? pod.securityContext?.runAsNonRoot).toBe(true);
    expect(context?.readOnlyRootFilesystem).toBe(true);
    expect(context?.allowPrivilegeEscalation).toBe(false);
    expect(context?.privileged ?? false).toBe(false);
    expect(context?.capabilities?.drop).toEqual(['ALL']);
    expect(context?.capabilities?.add ?? []).toEqual([]);
    // A writable /tmp for Node on the read-only root filesystem.
    const tmp = container.volumeMounts?.find((m) => m.mountPath === '/tmp');
    expect(pod.volumes?.find((v) => v.name === tmp?.name)?.emptyDir).toBeDefined();
  });

  test('reads every secret from files of a mounted Secret, never from an environment value', () => {
    const { pod, container, env } = get(overlay);
    for (const name of SECRET_VARIABLES) {
      expect(container.env?.find((v) => v.name === name)).toBeUndefined();
    }
    // Files only: a rotated Secret reaches mounted files (re-read by the gateway), never environment variables.
    expect(container.envFrom ?? []).toEqual([]);
    expect((container.env ?? []).filter((v) => v.valueFrom?.secretKeyRef)).toEqual([]);

    const fileVariables = SECRET_VARIABLES.map((name) => `${name}_FILE`).filter(
      (name) => env[name] !== undefined,
    );
    expect(fileVariables).toEqual(expect.arrayContaining(REQUIRED_FILE_VARIABLES));
    for (const name of fileVariables) {
      const file = env[name] as string;
      const mount = container.volumeMounts?.find((m) => isInside(file, m.mountPath));
      expect({ [name]: mount?.name }).toEqual({ [name]: expect.any(String) });
      expect(mount?.subPath).toBeUndefined();
      const secret = pod.volumes?.find((v) => v.name === mount?.name)?.secret;
      expect({ [name]: secret?.secretName }).toEqual({
        [name]: expect.stringMatching(/^payments-bff-upstream-/),
      });
      const key = posix.relative(mount?.mountPath as string, file);
      if (secret?.items) expect(secret.items.map((i) => i.path)).toContain(key);
    }
  });

  test('reads the client registry from a ConfigMap mounted as a directory, so that updates propagate', () => {
    const { pod, container, env } = get(overlay);
    const file = env.CLIENTS_FILE as string;
    expect(posix.isAbsolute(file)).toBe(true);
    const mount = container.volumeMounts?.find((m) => isInside(file, m.mountPath));
    expect(mount).toBeDefined();
    expect(mount?.subPath).toBeUndefined();
    const configMapName = pod.volumes?.find((v) => v.name === mount?.name)?.configMap?.name;
    const configMap = all<IConfigMap>(overlay, 'ConfigMap').find((c) => c.metadata?.name === configMapName);
    expect(configMap).toBeDefined();
    const registry = JSON.parse(configMap?.data?.[posix.basename(file)] ?? 'null') as {
      clients?: unknown[];
    } | null;
    expect(Array.isArray(registry?.clients)).toBe(true);
  });

  test('reads the provider accounts from a ConfigMap mounted as a directory, and no single-account variable', () => {
    const { pod, container, env } = get(overlay);
    const file = env.UPSTREAM_ACCOUNTS_FILE as string;
    expect(posix.isAbsolute(file)).toBe(true);
    const mount = container.volumeMounts?.find((m) => isInside(file, m.mountPath));
    expect(mount?.subPath).toBeUndefined();
    expect(pod.volumes?.find((v) => v.name === mount?.name)?.configMap?.name).toBe('payments-bff-accounts');
    // Both at once is a configuration error (SPEC §10).
    for (const name of ['UPSTREAM_BASE_URL', 'UPSTREAM_USERNAME_FILE', 'UPSTREAM_PASSWORD_FILE'])
      expect({ [name]: env[name] }).toEqual({ [name]: undefined });
    const accounts = accountsOf(overlay);
    expect(accounts.length).toBeGreaterThan(0);
    const ids = accounts.map((a) => a.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const account of accounts) {
      expect(account.id).toMatch(ACCOUNT_ID_PATTERN);
      expect(Object.keys(account).filter((field) => !ACCOUNT_FIELDS.has(field))).toEqual([]);
      expect(new URL(account.baseUrl).protocol).toBe('https:');
    }
  });

  test("every account's usernameFile and passwordFile is a key of that account's own mounted Secret", () => {
    const owners = new Map<string, string>();
    for (const account of accountsOf(overlay)) {
      for (const field of ['usernameFile', 'passwordFile'] as const) {
        const file = account[field];
        expect(posix.isAbsolute(file)).toBe(true);
        const found = secretKeyOf(overlay, file);
        expect({ [`${account.id}.${field}`]: found }).toEqual({
          [`${account.id}.${field}`]: {
            secretName: `payments-bff-account-${account.id}`,
            key: field === 'usernameFile' ? 'username' : 'password',
          },
        });
        // No two accounts read the same Secret: a rotation of one never touches another.
        const owner = owners.get(found?.secretName as string) ?? account.id;
        expect(owner).toBe(account.id);
        owners.set(found?.secretName as string, account.id);
      }
    }
  });

  test('holds no Secret and no secret literal in any rendered value', () => {
    const { objects, container } = get(overlay);
    expect(objects.filter((o) => o.kind === 'Secret')).toEqual([]);
    const findings: string[] = [];
    for (const object of objects) {
      for (const [path, value] of strings(object)) {
        for (const what of secretFindings(value))
          findings.push(`${object.kind}/${object.metadata.name} ${path}: ${what}`);
        if (/(?:^|\.)(?:password|passwd|secret|token|api[_-]?key)$/i.test(path)) {
          findings.push(`${object.kind}/${object.metadata.name} ${path}: a secret-named field`);
        }
      }
    }
    for (const variable of container.env ?? []) {
      if (/(PASSWORD|SECRET|TOKEN|_KEY|USERNAME)$/.test(variable.name) && variable.value !== undefined) {
        findings.push(`env ${variable.name}: a secret-named variable with a value`);
      }
    }
    expect(findings).toEqual([]);
  });

  test('runs its Redis (the chart values beside it) durable: append-only, fsync every second, a volume, no eviction', () => {
    const values = parse(readFileSync(join(K8S_DIR, 'overlays', overlay, 'redis-values.yaml'), 'utf8')) as {
      commonConfiguration?: string;
      master?: { persistence?: { enabled?: boolean } };
      replica?: { persistence?: { enabled?: boolean } };
      architecture?: string;
    };
    const lines = (values.commonConfiguration ?? '')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line && !line.startsWith('#'))
      .map((line): [string, string] => {
        const space = line.indexOf(' ');
        return [line.slice(0, space), line.slice(space + 1)];
      });
    const settings = durabilityOfServerSettings(lines);
    expect(judgeDurability(settings).state).toBe('durable');
    expect(settings).toMatchObject({
      appendonly: 'yes',
      appendfsync: 'everysec',
      maxmemoryPolicy: 'noeviction',
    });
    const nodes = values.architecture === 'replication' ? values.replica : values.master;
    expect(nodes?.persistence?.enabled).toBe(true);
  });

  test('autoscales on CPU from at least 3 replicas', () => {
    const [hpa, ...more] = all<IHorizontalPodAutoscaler>(overlay, 'HorizontalPodAutoscaler');
    expect(more).toEqual([]);
    expect(hpa?.spec?.scaleTargetRef).toMatchObject({
      kind: 'Deployment',
      name: get(overlay).deployment.metadata?.name,
    });
    expect(hpa?.spec?.minReplicas).toBeGreaterThanOrEqual(3);
    expect(hpa?.spec?.maxReplicas).toBeGreaterThan(hpa?.spec?.minReplicas ?? 0);
    expect(hpa?.spec?.metrics?.some((m) => m.resource?.name === 'cpu')).toBe(true);
  });

  test('limits voluntary disruptions with a PodDisruptionBudget over the gateway pods', () => {
    const [pdb] = all<IPodDisruptionBudget>(overlay, 'PodDisruptionBudget');
    const podLabels = get(overlay).deployment.spec?.template.metadata?.labels;
    expect(selects(pdb?.spec?.selector?.matchLabels, podLabels)).toBe(true);
    const keepsTwo = Number(pdb?.spec?.minAvailable) >= 2 || pdb?.spec?.maxUnavailable === 1;
    expect(keepsTwo).toBe(true);
    // Unready pods (the provider refusing every replica) must not block node drains.
    expect(pdb?.spec?.unhealthyPodEvictionPolicy).toBe('AlwaysAllow');
  });

  test('exposes port 80 on a ClusterIP Service that forwards to the gateway port', () => {
    const { container, deployment, env } = get(overlay);
    const services = all<IService>(overlay, 'Service');
    expect(services).toHaveLength(1);
    const service = services[0];
    expect(service?.spec?.type ?? 'ClusterIP').toBe('ClusterIP');
    expect(selects(service?.spec?.selector, deployment.spec?.template.metadata?.labels)).toBe(true);
    const http = service?.spec?.ports?.find((p) => p.port === 80);
    expect(containerPort(container, http?.targetPort)).toBe(Number(env.PORT ?? 8080));
  });

  test('is scraped by Prometheus on the metrics port', () => {
    const { deployment, container, env } = get(overlay);
    const annotations = deployment.spec?.template.metadata?.annotations ?? {};
    expect(annotations['prometheus.io/scrape']).toBe('true');
    expect(annotations['prometheus.io/path']).toBe('/metrics');
    const metricsPort = Number(env.METRICS_PORT ?? env.PORT ?? 8080);
    expect(Number(annotations['prometheus.io/port'])).toBe(metricsPort);
    expect(container.ports?.some((p) => p.containerPort === metricsPort)).toBe(true);
  });

  test('admits callers only from labelled namespaces and lets traffic out only to DNS, Redis and 443', () => {
    const { deployment, container } = get(overlay);
    const podLabels = deployment.spec?.template.metadata?.labels;
    const policies = all<INetworkPolicy>(overlay, 'NetworkPolicy').filter((p) =>
      selects(p.spec?.podSelector.matchLabels, podLabels),
    );
    const types = new Set(policies.flatMap((p) => p.spec?.policyTypes ?? []));
    expect([...types].sort()).toEqual(['Egress', 'Ingress']);

    const ingress = policies.flatMap((p) => p.spec?.ingress ?? []);
    expect(ingress.length).toBeGreaterThan(0);
    for (const rule of ingress) {
      expect(rule.from?.length).toBeGreaterThan(0);
      for (const peer of rule.from ?? []) {
        expect(peer.ipBlock).toBeUndefined();
        expect(Object.keys(peer.namespaceSelector?.matchLabels ?? {}).length).toBeGreaterThan(0);
      }
      expect(rule.ports?.length).toBeGreaterThan(0);
    }
    const clientRule = ingress.find((r) =>
      r.from?.some((p) => p.namespaceSelector?.matchLabels?.['payments-bff/client']),
    );
    expect(containerPort(container, clientRule?.ports?.[0]?.port)).toBe(8080);

    const isDns = (peer: INetworkPolicyPeer) => peer.podSelector?.matchLabels?.['k8s-app'] === 'kube-dns';
    const isRedis = (peer: INetworkPolicyPeer) =>
      peer.podSelector?.matchLabels?.['app.kubernetes.io/name'] === 'redis';
    const isProvider = (peer: INetworkPolicyPeer) =>
      peer.ipBlock !== undefined && !['0.0.0.0/0', '::/0'].includes(peer.ipBlock.cidr);
    const allowed = new Set<string>();
    for (const rule of policies.flatMap((p) => p.spec?.egress ?? [])) {
      const ports = (rule.ports ?? []).map((p) => Number(p.port));
      expect(ports.length).toBeGreaterThan(0);
      expect(rule.to?.length).toBeGreaterThan(0);
      for (const peer of rule.to ?? []) {
        if (isDns(peer)) expect(ports.every((p) => p === 53)).toBe(true);
        else if (isRedis(peer)) {
          expect(ports.every((p) => p === 6379 || p === 26379)).toBe(true);
          // Never "any namespace": only the namespace of this environment's Redis.
          expect(peer.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name']).toBe(
            redisNamespace(overlay),
          );
        } else if (isProvider(peer)) expect(ports).toEqual([443]);
        else throw new Error(`${overlay}: egress to an unexpected peer ${JSON.stringify(peer)}`);
        allowed.add(isDns(peer) ? 'dns' : isRedis(peer) ? 'redis' : 'provider');
      }
    }
    expect([...allowed].sort()).toEqual(['dns', 'provider', 'redis']);
  });

  test("passes the gateway's own configuration loader in production mode", async () => {
    const { env } = get(overlay);
    // The Secret's files, faked in a temporary directory (the loader reads them, as the gateway would).
    const secrets = tempDir('bff-k8s-secret-');
    const files: Record<string, string> = {
      UPSTREAM_USERNAME_FILE: 'gateway-user',
      UPSTREAM_PASSWORD_FILE: randomBytes(12).toString('hex'),
      TOKEN_ENCRYPTION_KEY_FILE: randomBytes(32).toString('base64'),
      REDIS_PASSWORD_FILE: randomBytes(12).toString('hex'),
    };
    const local: Record<string, string> = { ...env };
    for (const [name, content] of Object.entries(files)) {
      if (!env[name]) continue;
      const path = join(secrets, posix.basename(env[name]));
      writeFileSync(path, content);
      local[name] = path;
    }
    // The ConfigMap's accounts file, its credential paths pointed at the faked Secret files.
    const accounts = accountsOf(overlay).map((account) => ({
      ...account,
      usernameFile: secretFile(secrets, `${account.id}-username`, 'gateway-user'),
      passwordFile: secretFile(secrets, `${account.id}-password`, randomBytes(12).toString('hex')),
    }));
    expect(accounts.length).toBeGreaterThan(0);
    local.UPSTREAM_ACCOUNTS_FILE = join(secrets, 'accounts.json');
    writeFileSync(local.UPSTREAM_ACCOUNTS_FILE, JSON.stringify({ accounts }));
    const config = loadConfig(local, { cwd: '/app' });
    expect(config.production).toBe(true);
    expect(config.mode).toBe('upstream');
    expect(config.redis.topology.kind).not.toBe('none');
    expect(config.tokens.encryptionKey).toBeDefined();
    expect(config.callers.clientsFile).toBe(env.CLIENTS_FILE);
    const specs = await readAccountsFile(accountsFileOptionsOf(config, local.UPSTREAM_ACCOUNTS_FILE));
    expect(specs.map((spec) => spec.id)).toEqual(accounts.map((account) => account.id));
    for (const spec of specs) expect(spec.baseUrl).toMatch(/^https:\/\//);
  });
});

function secretFile(dir: string, name: string, content: string): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}

/** The namespace of the overlay's Redis, from its DNS names (`<svc>.<ns>.svc...`, `<pod>.<svc>.<ns>.svc...`). */
function redisNamespace(overlay: Overlay): string {
  const { env } = get(overlay);
  const hosts = [
    ...(env.REDIS_URL ? [new URL(env.REDIS_URL).hostname] : []),
    ...(env.REDIS_SENTINELS ?? '').split(',').flatMap((s) => (s ? [s.split(':')[0] as string] : [])),
  ];
  const namespaces = new Set(
    hosts.map((host) => {
      const labels = host.split('.');
      return labels[labels.indexOf('svc') - 1] ?? '';
    }),
  );
  expect(namespaces.size).toBe(1);
  return [...namespaces][0] as string;
}

/** Whether the NetworkPolicies of `overlay` let its gateway pods open `port` to a pod (matchLabels selectors only). */
function egressAllowed(
  overlay: Overlay,
  target: { namespace: string; labels: Record<string, string>; port: number },
): boolean {
  const { deployment } = get(overlay);
  const podLabels = deployment.spec?.template.metadata?.labels;
  const ownNamespace = deployment.metadata?.namespace;
  const namespaceLabels = { 'kubernetes.io/metadata.name': target.namespace };
  const matches = (selector: { matchLabels?: Record<string, string> } | undefined, labels: object) =>
    Object.entries(selector?.matchLabels ?? {}).every(
      ([key, value]) => (labels as Record<string, string>)[key] === value,
    );
  return all<INetworkPolicy>(overlay, 'NetworkPolicy')
    .filter((p) => selects(p.spec?.podSelector.matchLabels, podLabels))
    .flatMap((p) => p.spec?.egress ?? [])
    .some(
      (rule) =>
        (rule.ports ?? []).some((p) => Number(p.port) === target.port) &&
        (rule.to ?? []).some((peer) => {
          if (peer.ipBlock) return false;
          const namespaceOk = peer.namespaceSelector
            ? matches(peer.namespaceSelector, namespaceLabels)
            : target.namespace === ownNamespace;
          return namespaceOk && (!peer.podSelector || matches(peer.podSelector, target.labels));
        }),
    );
}

describe('the sandbox and production overlays', () => {
  test("each reaches its own Redis and never the other environment's", () => {
    const redis = { labels: { 'app.kubernetes.io/name': 'redis' }, port: 6379 };
    const sandboxRedis = redisNamespace('sandbox');
    const productionRedis = redisNamespace('production');
    expect(sandboxRedis).not.toBe(productionRedis);
    expect(egressAllowed('sandbox', { ...redis, namespace: sandboxRedis })).toBe(true);
    expect(egressAllowed('production', { ...redis, namespace: productionRedis })).toBe(true);
    expect(egressAllowed('sandbox', { ...redis, namespace: productionRedis })).toBe(false);
    expect(egressAllowed('production', { ...redis, namespace: sandboxRedis })).toBe(false);
    expect(egressAllowed('sandbox', { ...redis, port: 26379, namespace: productionRedis })).toBe(false);
  });

  test('use different namespaces, credentials and upstream URLs', () => {
    const [sandbox, production] = OVERLAYS.map(get) as [Rendered, Rendered];
    expect(sandbox.deployment.metadata?.namespace).not.toBe(production.deployment.metadata?.namespace);
    const secretNames = (r: Rendered) =>
      (r.pod.volumes ?? []).flatMap((v) => (v.secret?.secretName ? [v.secret.secretName] : []));
    expect(secretNames(sandbox).sort()).toEqual([
      'payments-bff-account-sandbox',
      'payments-bff-upstream-sandbox',
    ]);
    expect(secretNames(production).sort()).toEqual([
      'payments-bff-account-production-ar',
      'payments-bff-account-production-br',
      'payments-bff-upstream-production',
    ]);
    const baseUrls = (overlay: Overlay) => new Set(accountsOf(overlay).map((a) => a.baseUrl));
    for (const url of baseUrls('sandbox')) expect(baseUrls('production').has(url)).toBe(false);
    const ids = (overlay: Overlay) => accountsOf(overlay).map((a) => a.id);
    expect(ids('sandbox')).toEqual(['sandbox']);
    expect(ids('production')).toEqual(['production-br', 'production-ar']);
  });

  test('production reaches nothing over plain http', () => {
    const { text, env } = get('production');
    expect(env.UPSTREAM_ALLOW_HTTP ?? 'false').toBe('false');
    // Redis over TLS: the production rules' plaintext opt-out is the sandbox's alone.
    expect(env.REDIS_ALLOW_PLAINTEXT ?? 'false').toBe('false');
    expect(env.REDIS_TLS).toBe('true');
    expect(text).not.toMatch(/http:\/\//);
  });
});

/** The Kubernetes guide beside the manifests (the main README documents the development key on purpose). */
function kubernetesGuide(): string {
  return readFileSync(join(K8S_DIR, 'README.md'), 'utf8');
}

describe('the files under deploy/k8s and their guide', () => {
  const files = filesUnder(K8S_DIR);

  test.each(files.map((f) => [relative(ROOT, f)]))(
    '%s holds no secret literal and no Secret object',
    (file) => {
      const text = readFileSync(join(ROOT, file), 'utf8');
      expect(secretFindings(text)).toEqual([]);
      expect(text).not.toMatch(/^kind:\s*Secret\s*$/m);
    },
  );

  test('the Kubernetes guide holds no secret literal', () => {
    expect(secretFindings(kubernetesGuide())).toEqual([]);
  });

  test('comments about rotation say which secrets reload and which need a restart', () => {
    for (const file of ['base/deployment.yaml', 'extras/external-secret.yaml']) {
      const text = readFileSync(join(K8S_DIR, file), 'utf8');
      expect({ file, restart: /encryption key[\s\S]*Redis password[\s\S]*restart/i.test(text) }).toEqual({
        file,
        restart: true,
      });
    }
  });

  test('kube-linter checks that do not apply are switched off on the object, each with a reason', () => {
    const { deployment, container } = get('production');
    const annotations = deployment.metadata?.annotations ?? {};
    const ignored = Object.entries(annotations).filter(([key]) =>
      key.startsWith('ignore-check.kube-linter.io/'),
    );
    for (const [, reason] of ignored) expect(reason.length).toBeGreaterThan(20);
    // env-var-secret fires on names like *_PASSWORD_FILE: here they hold file paths, never a secret.
    const secretNamed = (container.env ?? []).filter((v) => /secret|password|token/i.test(v.name));
    expect(secretNamed.length).toBeGreaterThan(0);
    for (const variable of secretNamed) expect(variable.value).toMatch(/^\/var\/run\/secrets\//);
    expect(Object.keys(annotations)).toEqual(
      expect.arrayContaining([
        'ignore-check.kube-linter.io/env-var-secret',
        'ignore-check.kube-linter.io/no-anti-affinity',
      ]),
    );
    // no-anti-affinity is off because the topology spread does that job.
    expect(deployment.spec?.template.spec?.topologySpreadConstraints?.length).toBeGreaterThan(0);
  });

  test('the optional ExternalSecret fills exactly the keys the production pods read', () => {
    const [externalSecret] = parseObjects(
      readFileSync(join(K8S_DIR, 'extras', 'external-secret.yaml'), 'utf8'),
    );
    expect(externalSecret?.apiVersion).toMatch(/^external-secrets\.io\//);
    expect(externalSecret?.kind).toBe('ExternalSecret');
    const spec = externalSecret?.spec as {
      target: { name: string };
      data: { secretKey: string; remoteRef: object }[];
    };
    const { env, pod } = get('production');
    expect(spec.target.name).toBe(pod.volumes?.find((v) => v.secret)?.secret?.secretName);
    const keys = SECRET_VARIABLES.flatMap((name) => {
      const file = env[`${name}_FILE`];
      return file ? [posix.basename(file)] : [];
    }).sort();
    expect(spec.data.map((d) => d.secretKey).sort()).toEqual(keys);
    for (const item of spec.data) expect(item.remoteRef).toBeDefined();
  });

  test("the optional ExternalSecrets fill every production account's Secret with the keys its files name", () => {
    const externalSecrets = parseObjects(
      readFileSync(join(K8S_DIR, 'extras', 'external-secret.yaml'), 'utf8'),
    ) as unknown as { kind: string; spec: { target: { name: string }; data: { secretKey: string }[] } }[];
    for (const account of accountsOf('production')) {
      const wanted = [account.usernameFile, account.passwordFile].map((file) =>
        secretKeyOf('production', file),
      );
      const secretName = wanted[0]?.secretName;
      const synced = externalSecrets.find(
        (e) => e.kind === 'ExternalSecret' && e.spec.target.name === secretName,
      );
      expect({ [account.id]: synced?.spec.data.map((d) => d.secretKey).sort() }).toEqual({
        [account.id]: wanted.map((w) => w?.key).sort(),
      });
    }
  });

  test('the optional ServiceMonitor scrapes the metrics port of the gateway Service', () => {
    const [monitor] = parseObjects(readFileSync(join(K8S_DIR, 'extras', 'service-monitor.yaml'), 'utf8'));
    expect(monitor?.apiVersion).toBe('monitoring.coreos.com/v1');
    const spec = monitor?.spec as {
      selector: { matchLabels: Record<string, string> };
      endpoints: { port: string }[];
    };
    const [service] = all<IService>('production', 'Service');
    expect(selects(spec.selector.matchLabels, service?.metadata?.labels)).toBe(true);
    const portNames = service?.spec?.ports?.map((p) => p.name);
    for (const endpoint of spec.endpoints) expect(portNames).toContain(endpoint.port);
  });

  test('no kustomization relies on features that kustomize v2.0.3 (Debian kubectl 1.20) lacks', () => {
    const kustomizations = filesUnder(K8S_DIR).filter((f) => f.endsWith('kustomization.yaml'));
    expect(kustomizations.length).toBe(3);
    for (const file of kustomizations) {
      const [kustomization] = parseObjects(readFileSync(file, 'utf8'));
      const unsupported = Object.keys(kustomization ?? {}).filter(
        (key) => !PORTABLE_KUSTOMIZATION_FIELDS.has(key),
      );
      expect({ [relative(ROOT, file)]: unsupported }).toEqual({ [relative(ROOT, file)]: [] });
      for (const resource of (kustomization?.resources as string[] | undefined) ?? []) {
        expect(statSync(join(dirname(file), resource)).isFile()).toBe(true);
      }
    }
  });
});
