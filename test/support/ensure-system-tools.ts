// `npm test`'s pretest: finds the system tools the suite needs; installs the missing ones as root with apt-get, else stops with the command.
import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';
import {
  describeMissing,
  installCommand,
  type MachineLookups,
  planSystemTools,
  requiredTools,
} from './system-tools';

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

const machine: MachineLookups = {
  has: (command) =>
    isAbsolute(command)
      ? isExecutable(command)
      : (process.env.PATH ?? '')
          .split(delimiter)
          .some((dir) => dir !== '' && isExecutable(join(dir, command))),
  isRoot: () => process.getuid?.() === 0,
  hasAptGet: () => machine.has('apt-get'),
};

const tools = requiredTools(process.env);
const plan = planSystemTools(tools, machine);
if (plan.kind === 'stop') {
  process.stderr.write(describeMissing(plan.missing, plan.command));
  process.exit(1);
}
if (plan.kind === 'install') {
  process.stdout.write(`Installing what the tests need: ${plan.missing.map((t) => t.name).join(', ')}\n`);
  for (const [command, ...args] of plan.commands) {
    const result = spawnSync(command as string, args, {
      stdio: 'inherit',
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    });
    if (result.status !== 0) {
      process.stderr.write(`\`${[command, ...args].join(' ')}\` failed (exit ${result.status}).\n`);
      process.exit(1);
    }
  }
  const still = tools.filter((tool) => !machine.has(tool.command));
  if (still.length > 0) {
    process.stderr.write(describeMissing(still, installCommand(still, true)));
    process.exit(1);
  }
}
