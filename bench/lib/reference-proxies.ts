// The reference proxies the gateway is measured against: the hand-written bare proxy, the same with the gateway's
// required libraries (the stack proxy) and, when installed, nginx.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { DEFAULT_SERVER_LISTEN_BACKLOG } from '../../src/config/env-schema';
import { NODE, ROOT } from './fixtures';
import { freePort, type Served, start, waitFor } from './processes';

/**
 * The bare proxy with the same number of upstream sockets as the gateway; `extraEnv` e.g. NODE_EXTRA_CA_CERTS,
 * `nodeArgs` e.g. a profiler's flags.
 */
export function startBareProxy(
  name: string,
  target: string,
  token: string,
  maxSockets: number,
  extraEnv: Record<string, string>,
  nodeArgs: readonly string[] = [],
): Promise<Served> {
  return startNodeProxy('bare-proxy.js', name, { target, token, maxSockets, env: extraEnv, nodeArgs });
}

/**
 * The bare proxy plus the gateway's required libraries as the gateway configures them (bench/stack-proxy.ts): what
 * the stack alone costs. Callers present `apiKey` as X-Api-Key, as they do to the gateway.
 */
export function startStackProxy(
  name: string,
  target: string,
  token: string,
  maxSockets: number,
  options: {
    apiKey: string;
    logFile: string;
    extraEnv: Record<string, string>;
    nodeArgs?: readonly string[];
  },
): Promise<Served> {
  return startNodeProxy('stack-proxy.js', name, {
    target,
    token,
    maxSockets,
    env: { STACK_API_KEY: options.apiKey, STACK_LOG_FILE: options.logFile, ...options.extraEnv },
    nodeArgs: options.nodeArgs ?? [],
  });
}

async function startNodeProxy(
  script: string,
  name: string,
  options: {
    target: string;
    token: string;
    maxSockets: number;
    env: Record<string, string>;
    nodeArgs: readonly string[];
  },
): Promise<Served> {
  const port = await freePort();
  const proc = start(name, NODE, [...options.nodeArgs, join(ROOT, 'dist/bench', script)], {
    cwd: ROOT,
    env: {
      BARE_PORT: String(port),
      BARE_TARGET: options.target,
      BARE_TOKEN: options.token,
      BARE_MAX_SOCKETS: String(options.maxSockets),
      BARE_LISTEN_BACKLOG: String(DEFAULT_SERVER_LISTEN_BACKLOG),
      ...options.env,
    },
  });
  const url = `http://127.0.0.1:${port}`;
  // Any HTTP answer means it serves (the upstream's stats, proxied; the stack proxy answers 401 without a key).
  await waitFor(name, async () => (await fetch(`${url}/__simulator/stats`)).status > 0, proc);
  return { proc, url };
}

function onPath(command: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const candidate = join(dir, command);
    if (dir && existsSync(candidate)) return candidate;
  }
  for (const dir of ['/usr/sbin', '/usr/local/sbin', '/usr/local/nginx/sbin']) {
    if (existsSync(join(dir, command))) return join(dir, command);
  }
  return undefined;
}

export async function startNginx(
  tmp: string,
  name: string,
  target: string,
  token: string,
): Promise<Served | undefined> {
  const binary = onPath('nginx');
  if (!binary) return undefined;
  const port = await freePort();
  const prefix = join(tmp, name);
  mkdirSync(prefix, { recursive: true });
  const upstream = new URL(target);
  const conf = join(prefix, 'nginx.conf');
  writeFileSync(
    conf,
    `daemon off;
worker_processes 1;
pid ${prefix}/nginx.pid;
error_log ${prefix}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${prefix}/client_body;
  proxy_temp_path ${prefix}/proxy;
  fastcgi_temp_path ${prefix}/fastcgi;
  uwsgi_temp_path ${prefix}/uwsgi;
  scgi_temp_path ${prefix}/scgi;
  upstream simulator {
    server ${upstream.hostname}:${upstream.port};
    keepalive 64;
    # Below Node's 5 s server keep-alive (the gateway's agent does the same): nginx's default of 60 s reuses
    # connections the simulator has just closed, and answers those requests 502.
    keepalive_timeout 4s;
  }
  # Like Node's servers, no limit on requests per caller connection (nginx closes one every 1000 by default, and
  # a request the load generator sends as it closes fails).
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:${port} backlog=${DEFAULT_SERVER_LISTEN_BACKLOG};
    location / {
      proxy_pass http://simulator;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Authorization "Bearer ${token}";
    }
  }
}
`,
  );
  const proc = start(name, binary, ['-p', prefix, '-c', conf, '-e', `${prefix}/error.log`]);
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitFor('nginx', async () => (await fetch(`${url}/__simulator/stats`)).status > 0, proc, 10_000);
  } catch (error) {
    process.stderr.write(`bench: nginx did not start, skipping it: ${(error as Error).message}\n`);
    await proc.stop();
    return undefined;
  }
  return { proc, url };
}
