// No Docker engine runs here: the Dockerfile, docker-compose.yml and the nginx config are parsed and checked.
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parse } from 'yaml';
import { loadConfig } from '../../../src/config/load-config';
import { durabilityOfServerSettings, judgeDurability } from '../../../src/store/redis-durability';
import { tempDir } from '../../support/temp-dir';

const ROOT = resolve(__dirname, '..', '..', '..');
const read = (path: string) => readFileSync(resolve(ROOT, path), 'utf8');

interface Instruction {
  readonly keyword: string;
  readonly args: string;
}

/** Dockerfile instructions: comments dropped, `\` continuations joined. */
function parseDockerfile(text: string): Instruction[] {
  const logical: string[] = [];
  let current = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (current === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.startsWith('#')) continue;
    if (line.endsWith('\\')) {
      current += `${line.slice(0, -1)} `;
      continue;
    }
    logical.push(current + line);
    current = '';
  }
  return logical.map((line) => {
    const [keyword = '', ...rest] = line.split(/\s+/);
    return { keyword: keyword.toUpperCase(), args: rest.join(' ') };
  });
}

/** Instructions grouped by stage (each FROM starts one). */
function stages(instructions: Instruction[]): Instruction[][] {
  const out: Instruction[][] = [];
  for (const instruction of instructions) {
    if (instruction.keyword === 'FROM') out.push([]);
    out.at(-1)?.push(instruction);
  }
  return out;
}

const SECRET_NAME = /PASSWORD|SECRET|TOKEN|KEY|CREDENTIAL|USERNAME/i;

/** The image of a FROM line, with the global ARG defaults (ARGs before the first FROM) filled in. */
function baseImage(from: Instruction, instructions: Instruction[]): string {
  const args = new Map<string, string>();
  for (const instruction of instructions) {
    if (instruction.keyword === 'FROM') break;
    const [name = '', value = ''] = instruction.args.split('=', 2);
    if (instruction.keyword === 'ARG') args.set(name, value);
  }
  const image = from.args.split(/\s+/)[0] ?? '';
  return image.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a: string, b: string) => args.get(a ?? b) ?? '');
}

describe('Dockerfile', () => {
  const instructions = parseDockerfile(read('Dockerfile'));
  const byStage = stages(instructions);
  const runtime = byStage.at(-1) ?? [];

  test('multi-stage, every stage on one Node 24 image pinned to a digest', () => {
    expect(byStage.length).toBeGreaterThanOrEqual(2);
    const images = byStage.map((stage) => baseImage(stage[0] as Instruction, instructions));
    expect(new Set(images).size).toBe(1);
    const [image = ''] = images;
    // node:24…@sha256:<digest>: a tag alone (node:24-slim, even node:24.21.0-slim) can be rebuilt under the same name.
    expect({ image, pinned: /^node:24[\w.-]*@sha256:[0-9a-f]{64}$/.test(image) }).toEqual({
      image,
      pinned: true,
    });
  });

  test('the image leaves out the development registry, the compose files and the nginx config', () => {
    const copies = instructions.filter((i) => i.keyword === 'COPY' || i.keyword === 'ADD');
    const configCopies = copies.filter((c) => /(^|\s)config\b/.test(c.args));
    expect(configCopies.length).toBeGreaterThan(0);
    for (const copy of configCopies) {
      // Only named files: copying config/ whole would take clients.local.json along.
      const sources = copy.args.split(/\s+/).slice(0, -1);
      // The registry and the operations catalogue (with their schemas): the image serves the shipped catalogue.
      for (const source of sources) expect(source).toMatch(/^config\/(clients|operations)(\.schema)?\.json$/);
    }
    const ignored = read('.dockerignore')
      .split('\n')
      .map((l) => l.trim());
    for (const entry of ['config/clients.local.json', 'config/compose', 'config/nginx.conf'])
      expect(ignored).toContain(entry);
  });

  test('the runtime stage installs production dependencies only and copies the build output and config/', () => {
    const runs = runtime.filter((i) => i.keyword === 'RUN').map((i) => i.args);
    expect(runs.some((r) => /npm ci\b.*--omit=dev/.test(r))).toBe(true);
    const copies = runtime.filter((i) => i.keyword === 'COPY').map((i) => i.args);
    expect(copies.some((c) => c.startsWith('--from=build') && c.includes('dist'))).toBe(true);
    expect(copies.some((c) => /^config\/clients\.json\b/.test(c))).toBe(true);
    expect(runtime.some((i) => i.keyword === 'ENV' && /NODE_ENV=production/.test(i.args))).toBe(true);
  });

  test('the final stage runs as a non-root user (uid 10001, as deploy/k8s expects)', () => {
    const users = runtime.filter((i) => i.keyword === 'USER');
    expect(users.length).toBeGreaterThan(0);
    const user = users.at(-1)?.args ?? '';
    expect(user).not.toMatch(/^(root|0)(:|$)/);
    expect(user.split(':')[0]).toBe('10001');
  });

  test('HEALTHCHECK probes /healthz without curl, EXPOSE 8080, exec-form CMD', () => {
    const health = runtime.find((i) => i.keyword === 'HEALTHCHECK');
    expect(health?.args).toContain('/healthz');
    expect(health?.args).not.toMatch(/\bcurl\b/);
    expect(runtime.find((i) => i.keyword === 'EXPOSE')?.args).toBe('8080');
    expect(runtime.find((i) => i.keyword === 'CMD')?.args).toMatch(/^\[\s*"node"/);
  });

  test("the one CMD runs node with package.json's config.nodeFlags, as `npm start` and the bench do", () => {
    const manifest = JSON.parse(read('package.json')) as {
      config: { nodeFlags: string };
      scripts: { start: string };
    };
    const flags = manifest.config.nodeFlags.split(/\s+/);
    expect(flags.length).toBeGreaterThan(0);
    // Docker runs the last CMD, and an ENTRYPOINT would take it as arguments: one CMD, none.
    const cmds = runtime.filter((i) => i.keyword === 'CMD');
    expect(cmds).toHaveLength(1);
    expect(runtime.filter((i) => i.keyword === 'ENTRYPOINT')).toEqual([]);
    expect(JSON.parse(cmds[0]?.args ?? '[]')).toEqual(['node', ...flags, 'dist/src/main.js']);
    // Spelled out, not `$npm_package_config_nodeFlags`: zsh as npm's script-shell would pass them as one argument.
    expect(manifest.scripts.start).toBe(`node scripts/build.js && node ${flags.join(' ')} dist/src/main.js`);
  });

  test('no secret baked in: no secret-looking ENV or ARG, no .env or secrets copied', () => {
    for (const instruction of instructions.filter((i) => i.keyword === 'ENV' || i.keyword === 'ARG')) {
      const names = instruction.args.split(/\s+/).map((pair) => pair.split('=')[0] ?? '');
      for (const name of names) expect(name).not.toMatch(SECRET_NAME);
    }
    for (const copy of instructions.filter((i) => i.keyword === 'COPY' || i.keyword === 'ADD'))
      expect(copy.args).not.toMatch(/\.env\b|secrets/);
  });

  test('.dockerignore keeps dependencies, build output, git, env files, secrets and tests out', () => {
    const ignored = read('.dockerignore')
      .split('\n')
      .map((l) => l.trim());
    for (const entry of ['node_modules', 'dist', '.git', '.env', 'secrets', 'test', 'coverage'])
      expect(ignored).toContain(entry);
  });
});

describe('docker-compose.yml', () => {
  const compose = parse(read('docker-compose.yml'), { merge: true }) as {
    services: Record<string, Record<string, unknown>>;
    secrets: Record<string, { file?: string }>;
  };
  const services = compose.services;
  const gateways = Object.keys(services).filter((name) => /^gateway-\d+$/.test(name));
  const envOf = (name: string) => (services[name]?.environment ?? {}) as Record<string, string>;

  test('the gateways run the image CMD (its runtime flags): no command or entrypoint of their own', () => {
    expect(gateways.length).toBeGreaterThan(0);
    for (const name of gateways)
      expect({ name, command: services[name]?.command, entrypoint: services[name]?.entrypoint }).toEqual({
        name,
      });
  });

  test('a Redis service with a healthcheck', () => {
    expect(String(services.redis?.image)).toMatch(/^redis:/);
    expect(services.redis?.healthcheck).toBeDefined();
  });

  test('its Redis keeps the ledger and the quotas: append-only, fsync every second, a volume, no eviction', () => {
    const command = services.redis?.command as string[];
    expect(command[0]).toBe('redis-server');
    const pairs: [string, string][] = [];
    for (let i = 1; i + 1 < command.length; i += 2)
      pairs.push([command[i] as string, command[i + 1] as string]);
    const settings = durabilityOfServerSettings(pairs);
    expect(judgeDurability(settings).state).toBe('durable');
    expect(settings).toMatchObject({
      appendonly: 'yes',
      appendfsync: 'everysec',
      maxmemoryPolicy: 'noeviction',
    });
    const volumes = (services.redis?.volumes ?? []) as string[];
    const data = volumes.find((volume) => volume.endsWith(':/data'));
    expect(data).toBeDefined();
    expect(Object.keys((compose as { volumes?: object }).volumes ?? {})).toContain(data?.split(':')[0]);
  });

  test('two gateway replicas on Redis, each with a healthcheck and not in a profile', () => {
    expect(gateways).toEqual(['gateway-1', 'gateway-2']);
    for (const name of gateways) {
      expect(envOf(name).REDIS_URL).toMatch(/^redis:\/\/redis:6379/);
      expect(services[name]?.healthcheck).toBeDefined();
      expect(services[name]?.profiles).toBeUndefined();
    }
  });

  test('the load balancer is published on loopback only, by default and in the local profile', () => {
    const [mapping] = (services['load-balancer']?.ports ?? []) as string[];
    const localEnv = Object.fromEntries(
      read('config/compose/local.env')
        .split('\n')
        .filter((line) => /^\w+=/.test(line))
        .map((line) => line.split('=', 2) as [string, string]),
    );
    // Compose's interpolation: ${NAME:-default}, from the env file or the default.
    const interpolate = (text: string, env: Record<string, string>) =>
      text.replace(/\$\{(\w+):-([^}]*)\}/g, (_, name: string, fallback: string) => env[name] || fallback);
    for (const env of [{}, localEnv]) {
      const published = interpolate(mapping ?? '', env);
      // host_ip:host_port:container_port; without a host_ip Docker publishes on every interface.
      expect(published).toMatch(/^127\.0\.0\.1:\d+:8080$/);
    }
  });

  test('a load balancer that depends on both replicas', () => {
    const lb = services['load-balancer'];
    expect(lb).toBeDefined();
    expect(Object.keys((lb?.depends_on ?? {}) as object).sort()).toEqual(gateways);
    expect(JSON.stringify(lb?.volumes)).toContain('config/nginx.conf');
  });

  test('secrets are files: *_FILE variables under /run/secrets, no plain secret values', () => {
    for (const name of gateways) {
      const env = envOf(name);
      expect(env.UPSTREAM_USERNAME_FILE).toBe('/run/secrets/upstream_username');
      expect(env.UPSTREAM_PASSWORD_FILE).toBe('/run/secrets/upstream_password');
      expect(env.TOKEN_ENCRYPTION_KEY_FILE).toBe('/run/secrets/token_encryption_key');
      for (const plain of [
        'UPSTREAM_USERNAME',
        'UPSTREAM_PASSWORD',
        'TOKEN_ENCRYPTION_KEY',
        'REDIS_PASSWORD',
      ])
        expect(env[plain]).toBeUndefined();
      expect(services[name]?.secrets).toEqual([
        'upstream_username',
        'upstream_password',
        'token_encryption_key',
      ]);
    }
    for (const secret of Object.values(compose.secrets)) expect(secret.file).toMatch(/^\.\/secrets\//);
    expect(read('docker-compose.yml')).not.toMatch(/UPSTREAM_PASSWORD\s*[:=]\s*\S/);
    expect(read('.gitignore')).toMatch(/^secrets\/$/m);
  });

  test('the simulator runs from the same image only under the local profile', () => {
    const simulator = services.simulator;
    expect(simulator?.profiles).toEqual(['local']);
    expect(simulator?.image).toBe(services['gateway-1']?.image);
    expect(simulator?.command).toEqual(['node', 'dist/src/simulator/main.js']);
    expect(((simulator?.environment ?? {}) as Record<string, string>).SIMULATOR_HOST).toBe('0.0.0.0');
    for (const [name, service] of Object.entries(services))
      if (name !== 'simulator') expect(service.profiles).toBeUndefined();
  });

  test("each replica's environment passes the gateway's configuration loader under the production rules", () => {
    // Compose interpolation of ${NAME:-default}, with the operator's one required setting (README).
    const operator: Record<string, string> = { UPSTREAM_BASE_URL: 'https://api.payments.example' };
    const secrets = tempDir('bff-compose-secrets-');
    for (const name of gateways) {
      const env: Record<string, string> = {};
      for (const [key, raw] of Object.entries(envOf(name))) {
        const value = String(raw).replace(
          /\$\{(\w+):-([^}]*)\}/g,
          (_m, variable: string, fallback: string) => operator[variable] ?? fallback,
        );
        // The secrets, faked as files (the loader reads them as the gateway would).
        if (key.endsWith('_FILE')) {
          const file = resolve(secrets, key);
          writeFileSync(file, key.startsWith('TOKEN') ? randomBytes(32).toString('base64') : 'x');
          env[key] = file;
        } else env[key] = value;
      }
      const config = loadConfig(env, { cwd: ROOT });
      expect(config.production).toBe(true);
      expect(config.server.metricsOnMainPort).toBe(false);
    }
  });

  test('the local env file points the gateways at the simulator in development mode', () => {
    const env = Object.fromEntries(
      read('config/compose/local.env')
        .split('\n')
        .filter((line) => /^\w+=/.test(line))
        .map((line) => line.split('=', 2) as [string, string]),
    );
    expect(env).toMatchObject({
      NODE_ENV: 'development',
      UPSTREAM_BASE_URL: 'http://simulator:4010',
      UPSTREAM_ALLOW_HTTP: 'true',
    });
    expect(existsSync(resolve(ROOT, env.CLIENTS_FILE ?? ''))).toBe(true);
  });
});

describe('docker-compose.accounts.yml (several provider accounts over docker-compose.yml)', () => {
  const base = parse(read('docker-compose.yml'), { merge: true }) as {
    services: Record<string, { environment?: Record<string, string>; secrets?: string[] }>;
    secrets: Record<string, { file?: string }>;
  };
  // `!override` is Compose's merge tag (the list replaces the base list); the yaml library reads it as a plain list.
  const override = parse(read('docker-compose.accounts.yml'), { merge: true, logLevel: 'error' }) as {
    services: Record<string, { environment?: Record<string, string>; secrets?: string[] }>;
    secrets: Record<string, { file?: string }>;
  };
  const gateways = Object.keys(base.services).filter((name) => /^gateway-\d+$/.test(name));
  /** A replica as Compose merges the two files: environment by key, the secret list replaced (`!override`). */
  const merged = (name: string) => ({
    environment: { ...base.services[name]?.environment, ...override.services[name]?.environment },
    secrets: override.services[name]?.secrets ?? [],
  });
  const secrets = { ...base.secrets, ...override.secrets };
  const accountsFile = (env: Record<string, string>) =>
    JSON.parse(read(env.UPSTREAM_ACCOUNTS_FILE?.replace(/^\/app\//, '') ?? '')) as {
      accounts: { id: string; baseUrl: string; usernameFile: string; passwordFile: string }[];
    };

  test('replaces the secret list with a tag Compose merges by replacement', () => {
    expect(read('docker-compose.accounts.yml')).toMatch(/secrets: !override\n/);
    for (const name of gateways) expect(override.services[name]?.secrets).toBeDefined();
  });

  test('every replica reads the accounts file from the ./config mount, and no single-account variable', () => {
    for (const name of gateways) {
      const env = merged(name).environment;
      expect(env.UPSTREAM_ACCOUNTS_FILE).toMatch(/^\/app\/config\//);
      for (const single of ['UPSTREAM_BASE_URL', 'UPSTREAM_USERNAME_FILE', 'UPSTREAM_PASSWORD_FILE'])
        expect({ [single]: env[single] }).toEqual({ [single]: '' });
      expect(env.TOKEN_ENCRYPTION_KEY_FILE).toBe('/run/secrets/token_encryption_key');
    }
  });

  test("every account's usernameFile and passwordFile is a secret of each replica, from a file under ./secrets/", () => {
    for (const name of gateways) {
      const { environment, secrets: list } = merged(name);
      const { accounts } = accountsFile(environment);
      expect(accounts.length).toBeGreaterThan(1);
      const needed = accounts.flatMap((a) => [a.usernameFile, a.passwordFile]);
      for (const file of needed) {
        const secret = /^\/run\/secrets\/(\w+)$/.exec(file)?.[1] ?? '';
        expect({ file, mounted: list.includes(secret) }).toEqual({ file, mounted: true });
        expect(secrets[secret]?.file).toMatch(/^\.\/secrets\/accounts\//);
      }
      // Exactly what the accounts and the fleet need: the single-account files are not required any more.
      expect(list.sort()).toEqual(
        [...needed.map((f) => f.replace('/run/secrets/', '')), 'token_encryption_key'].sort(),
      );
      for (const account of accounts) expect(new URL(account.baseUrl).protocol).toBe('https:');
    }
  });
});

/** nginx durations (`55s`, `1m`, `500ms`; a bare number is seconds) in milliseconds. */
function nginxMs(value: string): number {
  const match = /^(\d+)(ms|s|m)?$/.exec(value);
  if (!match) throw new Error(`not an nginx duration: ${value}`);
  return Number(match[1]) * ({ ms: 1, s: 1000, m: 60_000 }[match[2] ?? 's'] ?? 1000);
}

describe('nginx load balancer config', () => {
  const nginx = read('config/nginx.conf');

  test('nginx drops idle upstream connections before the gateways do (by the compose value and the default)', () => {
    const upstream = /upstream\s+\w+\s*\{([^}]*)\}/.exec(nginx)?.[1] ?? '';
    // Unset, nginx keeps idle upstream connections 60 s: it must be explicit, and shorter.
    const idle = /keepalive_timeout\s+(\w+);/.exec(upstream)?.[1];
    expect(idle).toBeDefined();
    const nginxIdleMs = nginxMs(idle as string);
    const compose = parse(read('docker-compose.yml'), { merge: true }) as {
      services: Record<string, { environment?: Record<string, string> }>;
    };
    for (const name of ['gateway-1', 'gateway-2']) {
      const gatewayIdleMs = Number(compose.services[name]?.environment?.SERVER_KEEP_ALIVE_TIMEOUT_MS);
      expect({ name, gatewayOutlastsNginx: gatewayIdleMs > nginxIdleMs }).toEqual({
        name,
        gatewayOutlastsNginx: true,
      });
    }
    expect(loadConfig({}).server.keepAliveTimeoutMs).toBeGreaterThan(nginxIdleMs);
  });

  test('the upstream block lists both replicas and the server proxies to it', () => {
    const upstream = /upstream\s+(\w+)\s*\{([^}]*)\}/.exec(nginx);
    expect(upstream).not.toBeNull();
    const servers = [...(upstream?.[2] ?? '').matchAll(/server\s+([\w.-]+):(\d+)/g)].map(
      (m) => `${m[1]}:${m[2]}`,
    );
    expect(servers).toEqual(['gateway-1:8080', 'gateway-2:8080']);
    expect(nginx).toContain(`proxy_pass http://${upstream?.[1]};`);
    expect(nginx).toMatch(/listen\s+8080\s+backlog=4096;/);
  });
});
