// Jest runs the TypeScript sources through SWC (type checking is `npm run typecheck`'s job).
// A few dependencies ship as ES modules only; SWC turns them into CommonJS for Jest's module system.
const esmOnly = [
  'jose',
  'http-proxy-middleware',
  'httpxy',
  'is-plain-obj',
  'cockatiel',
  'openid-client',
  'oauth4webapi',
  'oidc-provider',
];

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: {
    '^.+\\.(m?js|tsx?)$': ['@swc/jest', { jsc: { target: 'es2023' }, module: { type: 'commonjs' } }],
  },
  transformIgnorePatterns: [`/node_modules/(?!(${esmOnly.join('|')})/)`],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testTimeout: 30000,
  maxWorkers: 2,
};
