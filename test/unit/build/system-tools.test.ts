// `npm test`'s own set-up: which system tools are missing, and whether to install them or stop with the command.
import {
  describeMissing,
  type MachineLookups,
  planSystemTools,
  requiredTools,
  type SystemTool,
} from '../../support/system-tools';

const tools = requiredTools({});

function machine(present: string[], { root = true, apt = true } = {}): MachineLookups {
  return { has: (command) => present.includes(command), isRoot: () => root, hasAptGet: () => apt };
}
const everything = tools.map((tool) => tool.command);

describe('requiredTools', () => {
  test('lists what the suite starts: redis-server, redis-cli, ss, Chromium at /usr/bin/chromium, kubectl, promtool', () => {
    expect(tools.map((t) => [t.command, t.debianPackage])).toEqual([
      ['redis-server', 'redis-server'],
      ['redis-cli', 'redis-tools'],
      ['ss', 'iproute2'],
      ['/usr/bin/chromium', 'chromium'],
      ['kubectl', 'kubernetes-client'],
      ['promtool', 'prometheus'],
    ]);
  });

  test('KUBECTL, which the manifest tests honour, is the kubectl looked for', () => {
    expect(requiredTools({ KUBECTL: '/opt/k/kubectl' }).map((t) => t.command)).toContain('/opt/k/kubectl');
  });
});

describe('planSystemTools', () => {
  test('nothing missing: ready, nothing installed, whoever runs it', () => {
    expect(planSystemTools(tools, machine(everything, { root: false, apt: false }))).toEqual({
      kind: 'ready',
    });
  });

  test('root with apt-get: one update, then one install of exactly the missing packages', () => {
    const plan = planSystemTools(tools, machine(['redis-server', 'redis-cli', 'ss', 'promtool']));
    expect(plan).toEqual({
      kind: 'install',
      missing: tools.filter((t) => ['chromium', 'kubernetes-client'].includes(t.debianPackage)),
      commands: [
        ['apt-get', 'update', '-qq'],
        ['apt-get', 'install', '-y', '-qq', '--no-install-recommends', 'chromium', 'kubernetes-client'],
      ],
    });
  });

  test('a package shared by two missing tools is installed once', () => {
    const twoFromOne: SystemTool[] = [
      { name: 'a', command: 'a', debianPackage: 'p', neededBy: 'x' },
      { name: 'b', command: 'b', debianPackage: 'p', neededBy: 'y' },
    ];
    const plan = planSystemTools(twoFromOne, machine([]));
    expect(plan.kind === 'install' && plan.commands[1]).toEqual([
      'apt-get',
      'install',
      '-y',
      '-qq',
      '--no-install-recommends',
      'p',
    ]);
  });

  test('not root: stops with the one sudo command that installs them all, and installs nothing', () => {
    const plan = planSystemTools(
      tools,
      machine(['redis-server', 'redis-cli', 'ss', 'kubectl', 'promtool'], { root: false }),
    );
    expect(plan).toEqual({
      kind: 'stop',
      missing: tools.filter((t) => t.debianPackage === 'chromium'),
      command: 'sudo apt-get update && sudo apt-get install -y --no-install-recommends chromium',
    });
  });

  test('root without apt-get (not Debian): stops with the command instead of guessing a package manager', () => {
    const plan = planSystemTools(tools, machine([], { root: true, apt: false }));
    expect(plan.kind).toBe('stop');
    expect(plan.kind === 'stop' && plan.command).toBe(
      'apt-get update && apt-get install -y --no-install-recommends redis-server redis-tools iproute2 chromium kubernetes-client prometheus',
    );
  });

  test('the stop message names each missing tool, the tests that need it, and the command', () => {
    const plan = planSystemTools(tools, machine(['redis-server', 'redis-cli', 'ss'], { root: false }));
    if (plan.kind !== 'stop') throw new Error('expected a stop');
    const message = describeMissing(plan.missing, plan.command);
    expect(message).toContain('Chromium (/usr/bin/chromium), for the browser CORS tests');
    expect(message).toContain('kubectl (kubectl), for the Kubernetes manifest tests');
    expect(message).toContain('sudo apt-get install -y --no-install-recommends chromium kubernetes-client');
    expect(message).not.toContain('redis-server (');
  });
});
