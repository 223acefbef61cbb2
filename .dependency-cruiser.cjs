// Folder boundaries checked by `npm run lint` (dependency-cruiser): the rules of docs/architecture.md's Layout.
// Only src/ is cruised: tests and the bench may import a folder's internal/ modules to test them directly.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A cycle makes two modules one: neither can be read, tested or loaded without the other.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-foreign-internal',
      severity: 'error',
      comment: "A folder's internal/ is reached only from inside that folder; others use its index.ts.",
      from: { path: '^src/([^/]+)/' },
      to: { path: '^src/[^/]+/internal/', pathNot: '^src/$1/' },
    },
    {
      name: 'no-internal-from-root',
      severity: 'error',
      comment: "The composition root (src/*.ts) uses a folder's index.ts, not its internal/.",
      from: { path: '^src/[^/]+\\.ts$' },
      to: { path: '^src/[^/]+/internal/' },
    },
    {
      name: 'simulator-only-from-local-mode',
      severity: 'error',
      comment:
        'Production start-up never loads development stand-ins: only src/local-mode* imports src/simulator/ and src/dev-*/.',
      from: { path: '^src/', pathNot: ['^src/local-mode', '^src/simulator/', '^src/dev-[^/]+/'] },
      to: { path: ['^src/simulator/', '^src/dev-[^/]+/'] },
    },
    {
      name: 'simulator-self-contained',
      severity: 'error',
      comment:
        'The simulator stands alone (npm run simulator): of the gateway it uses only the ConfigError class.',
      from: { path: '^src/simulator/' },
      to: { path: '^src/', pathNot: ['^src/simulator/', '^src/config/config-error\\.ts$'] },
    },
    {
      name: 'http-knows-no-subsystem',
      severity: 'error',
      comment:
        'src/http/ is the plain HTTP toolbox: it reaches nothing of tokens or forwarding, not even through others.',
      from: { path: '^src/http/' },
      to: { path: '^src/(tokens|forwarding)/', reachable: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default'],
    },
  },
};
