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
      name: 'no-folder-cycle',
      severity: 'error',
      comment:
        'Folders depend one way (docs/architecture.md): two folders using each other are one subsystem in two places.',
      scope: 'folder',
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
      name: 'no-root-from-folders',
      severity: 'error',
      comment:
        'The composition root (src/*.ts) uses the folders, never the reverse: a folder importing app.ts or gateway.ts is tied to the whole pipeline. Local mode is reached on demand (its own rules).',
      from: { path: '^src/[^/]+/' },
      to: { path: '^src/[^/]+\\.ts$', pathNot: '^src/local-mode[^/]*\\.ts$' },
    },
    {
      name: 'simulator-only-from-local-mode',
      severity: 'error',
      comment:
        'Production start-up never loads development stand-ins: only src/local-mode* imports src/simulator/ and src/dev-*/.',
      from: { path: '^src/', pathNot: ['^src/local-mode[^/]*\\.ts$', '^src/simulator/', '^src/dev-[^/]+/'] },
      to: { path: ['^src/simulator/', '^src/dev-[^/]+/'] },
    },
    {
      name: 'local-mode-only-on-demand',
      severity: 'error',
      comment:
        'Local mode loads the simulator: only the entry points (main.ts, the doctor) reach it, by an import() taken in local mode.',
      from: {
        path: '^src/',
        pathNot: ['^src/main\\.ts$', '^src/operations/doctor-cli\\.ts$', '^src/local-mode[^/]*\\.ts$'],
      },
      to: { path: '^src/local-mode[^/]*\\.ts$' },
    },
    {
      name: 'local-mode-not-static',
      severity: 'error',
      comment: 'A static import of local mode would load the simulator at every production start-up.',
      from: { path: '^src/', pathNot: '^src/local-mode[^/]*\\.ts$' },
      to: { path: '^src/local-mode[^/]*\\.ts$', dynamic: false },
    },
    {
      name: 'no-test-code-in-src',
      severity: 'error',
      comment: 'Test helpers and the bench are not shipped: nothing in src/ imports them.',
      from: { path: '^src/' },
      to: { path: '^(test|bench)/' },
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
