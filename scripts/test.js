// `npm test`: the whole suite in two jest runs. First everything but test/system/, two workers at a time; then the
// system tests one at a time. A system test starts several gateway processes, a Redis and the simulator, and some
// assert what a fleet does second by second (the provider budget: at most its rate + 5 % in every second); beside
// another suite on the same two cores their processes starve, and the simulator, which counts the provider's calls
// by its own clock in the test's process, counts calls of one second in the next (measured in a clean clone's CI:
// 52 and 58 calls in one second against a bound of 42, with the same build passing alone). Both runs always run;
// the exit status is the first failure's. With arguments (`npm test -- test/unit/x.test.ts`), one jest run with them.
'use strict';
const { spawnSync } = require('node:child_process');

const jest = require.resolve('jest/bin/jest');
const run = (args) => spawnSync(process.execPath, [jest, ...args], { stdio: 'inherit' }).status ?? 1;

const given = process.argv.slice(2);
if (given.length > 0) process.exit(run(given));
const rest = run(['--testPathIgnorePatterns', '/test/system/']);
const system = run(['--runInBand', '--testPathPatterns', '/test/system/']);
process.exit(rest || system);
