// `npm test`: the whole suite in two jest runs. First everything but test/system/, two workers at a time; then the
// system tests one at a time. A system test starts several gateway processes, a Redis and the simulator, and some
// assert what a fleet does second by second (the provider budget: at most its rate + 5 % in every second); beside
// another suite on the same two cores their processes starve, and the simulator, which counts the provider's calls
// by its own clock in the test's process, counts calls of one second in the next (measured in a clean clone's CI:
// 52 and 58 calls in one second against a bound of 42, with the same build passing alone). Both runs always run;
// the exit status is the first failure's. With arguments (`npm test -- test/unit/x.test.ts`), one jest run with them.
// SIGINT and SIGTERM are passed on to the jest run in progress (npm signals this script, not its children), and
// stop what is left.
'use strict';
const { spawn } = require('node:child_process');
const { resolve } = require('node:path');

const jest = require.resolve('jest/bin/jest');
/** This checkout's test/system/ as a path regex (jest matches absolute paths). */
const systemTests = `^${(resolve(__dirname, '..', 'test', 'system') + '/').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`;

let stopped = false;
let current;
for (const signal of ['SIGINT', 'SIGTERM'])
  process.on(signal, () => {
    stopped = true;
    current?.kill(signal);
  });

/** Runs jest with `args`; resolves with its exit status (1 when it ended on a signal). */
function run(args) {
  return new Promise((done) => {
    current = spawn(process.execPath, [jest, ...args], { stdio: 'inherit' });
    current.on('exit', (status) => done(status ?? 1));
  });
}

async function main() {
  const given = process.argv.slice(2);
  if (given.length > 0) return run(given);
  const rest = await run(['--testPathIgnorePatterns', systemTests]);
  if (stopped) return rest || 1;
  const system = await run(['--runInBand', '--testPathPatterns', systemTests]);
  return rest || system;
}

main().then((status) => process.exit(status));
