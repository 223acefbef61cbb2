// The system tools the test suite starts for real, and what to do when some are missing: install or stop with the command.

/** One tool the suite needs, how to tell it is there, and the Debian package that provides it. */
export interface SystemTool {
  readonly name: string;
  /** A command looked up on the PATH, or an absolute path that must be an executable file. */
  readonly command: string;
  readonly debianPackage: string;
  /** Which tests need it, for the message. */
  readonly neededBy: string;
}

/** What the machine has; injected so the decision can be tested without installing anything. */
export interface MachineLookups {
  /** `command` is on the PATH (a bare name) or an executable file (an absolute path). */
  has(command: string): boolean;
  isRoot(): boolean;
  hasAptGet(): boolean;
}

export type ToolPlan =
  | { readonly kind: 'ready' }
  | {
      readonly kind: 'install';
      readonly missing: readonly SystemTool[];
      readonly commands: readonly string[][];
    }
  | { readonly kind: 'stop'; readonly missing: readonly SystemTool[]; readonly command: string };

/** Everything the suite starts: keep in step with the tests (a new system tool goes here, nowhere else). */
export function requiredTools(env: NodeJS.ProcessEnv): SystemTool[] {
  return [
    {
      name: 'redis-server',
      command: 'redis-server',
      debianPackage: 'redis-server',
      neededBy: 'every Redis test',
    },
    { name: 'redis-cli', command: 'redis-cli', debianPackage: 'redis-tools', neededBy: 'the shutdown test' },
    { name: 'ss', command: 'ss', debianPackage: 'iproute2', neededBy: 'the listen backlog test' },
    {
      name: 'Chromium',
      command: '/usr/bin/chromium',
      debianPackage: 'chromium',
      neededBy: 'the browser CORS tests',
    },
    {
      name: 'kubectl',
      command: env.KUBECTL || 'kubectl',
      debianPackage: 'kubernetes-client',
      neededBy: 'the Kubernetes manifest tests',
    },
    {
      name: 'promtool',
      command: 'promtool',
      debianPackage: 'prometheus',
      neededBy: 'the dashboard and alert-rule tests',
    },
  ];
}

/** The one command that installs every missing tool (Debian/Ubuntu package names). */
export function installCommand(missing: readonly SystemTool[], asRoot: boolean): string {
  const sudo = asRoot ? '' : 'sudo ';
  const packages = [...new Set(missing.map((tool) => tool.debianPackage))].join(' ');
  return `${sudo}apt-get update && ${sudo}apt-get install -y --no-install-recommends ${packages}`;
}

/** Nothing missing: ready. Root with apt-get: install (update once, then one install). Anything else: stop. */
export function planSystemTools(tools: readonly SystemTool[], machine: MachineLookups): ToolPlan {
  const missing = tools.filter((tool) => !machine.has(tool.command));
  if (missing.length === 0) return { kind: 'ready' };
  const root = machine.isRoot();
  if (root && machine.hasAptGet()) {
    const packages = [...new Set(missing.map((tool) => tool.debianPackage))];
    return {
      kind: 'install',
      missing,
      commands: [
        ['apt-get', 'update', '-qq'],
        ['apt-get', 'install', '-y', '-qq', '--no-install-recommends', ...packages],
      ],
    };
  }
  return { kind: 'stop', missing, command: installCommand(missing, root) };
}

/** The message printed when the suite cannot run: what is missing, for which tests, and the one fix. */
export function describeMissing(missing: readonly SystemTool[], command: string): string {
  const lines = missing.map((tool) => `  - ${tool.name} (${tool.command}), for ${tool.neededBy}`);
  return [
    'The tests start real processes, and this machine lacks:',
    ...lines,
    'Install them all with:',
    `  ${command}`,
    '',
  ].join('\n');
}
