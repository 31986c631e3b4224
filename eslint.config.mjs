// Code lint for the TypeScript sources (`npm run lint:code`); the spec has its own lint
// (`npm run lint:spec`, redocly.yaml). typescript-eslint's type-aware recommended rules,
// with the exceptions below, each with its reason.
import js from '@eslint/js';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

// The layers (docs/layout.md): imports only go down, scripts/ -> server/ -> handlers/ ->
// domain/, with db/ below server/ and above domain/, and generated/ under them all.
// import-x resolves each import to its file, so a zone holds however the path is written.
const zone = (target, from, message, except) => ({ target, from, message, ...(except && { except }) });
const layerZones = [
  zone(
    'domain',
    ['server', 'db', 'handlers', 'scripts', 'contract', 'tests'],
    'domain/ is the bottom layer: it works over the storage port (domain/storage.ts).',
  ),
  zone(
    'db',
    ['server', 'handlers', 'scripts', 'contract', 'tests'],
    'db/ implements the storage port of domain/, below server/ and handlers/.',
  ),
  zone(
    'handlers',
    ['server', 'db', 'scripts', 'contract', 'tests'],
    'The server runs the handlers: they import only domain/, generated/ and each other.',
  ),
  zone('handlers', 'domain/storage.ts', 'Handlers call the domain (ctx.repos), never the storage under it.'),
  zone('server', ['scripts', 'contract', 'tests'], 'server/ imports neither scripts/, contract/ nor tests/.'),
  zone('scripts', 'tests', 'contract/ and scripts/ import no test helpers (docs/layout.md).'),
];

// server/ by room, from the top: a room imports only the rooms of the rows below its own
// (server/README.md), and only the composition root (app.ts) knows the handler table.
const serverRows = [
  ['main.ts'],
  ['app.ts'],
  ['observability'],
  ['http'],
  ['pipeline', 'deprecation', 'pages', 'cluster.ts'],
  ['security', 'delivery-worker.ts'],
  ['spec.ts', 'startup.ts'],
  ['config.ts', 'files.ts', 'content-coding.ts', 'heap.ts', 'address-key.ts'],
];
const serverZones = serverRows.flatMap((row, i) =>
  row.flatMap((room) => {
    const above = serverRows
      .slice(0, i + 1)
      .flat()
      .filter((other) => other !== room)
      .map((other) => `server/${other}`);
    return [
      ...(above.length > 0
        ? [zone(`server/${room}`, above, `server/${room} imports only the rooms below its own (server/README.md).`)]
        : []),
      ...(room === 'app.ts'
        ? []
        : [
            zone(
              `server/${room}`,
              'handlers',
              'Only the composition root (server/app.ts) knows the handler table; the rest of server/ uses handlers/types.ts.',
              ['./types.ts'],
            ),
          ]),
    ];
  }),
);
const databases = ['pg', 'better-sqlite3', 'drizzle-orm*'];

export default tseslint.config(
  // generated/ and client/openapi.ts are written by `npm run generate` and checked by `generate:check`.
  { ignores: ['node_modules/', 'generated/', 'client/openapi.ts', 'data/', 'coverage/', 'dist/', 'client/dist/', 'contract/dist/'] },
  js.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    // A disable comment that no longer silences anything is itself an error.
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // Handlers and the validator's security handlers are async to fit an async interface,
      // whether or not this implementation awaits anything.
      '@typescript-eslint/require-await': 'off',
      // Express tells an error handler by its four parameters; `_` marks one kept for shape.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' },
      ],
    },
  },
  {
    // No two files import each other, however indirectly (import-x follows value imports,
    // not `import type`), and no import runs back up the layers above (either kind).
    files: ['**/*.ts', '**/*.mjs', '**/*.cjs'],
    plugins: { 'import-x': importX },
    settings: {
      'import-x/extensions': ['.ts', '.cts', '.mjs', '.cjs', '.js'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts', '.cts'] },
      'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.cts', '.mjs', '.cjs', '.js', '.json'] })],
    },
    rules: {
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      'import-x/no-restricted-paths': ['error', { basePath: import.meta.dirname, zones: [...layerZones, ...serverZones] }],
    },
  },
  {
    files: ['domain/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['express*', ...databases], message: 'domain/ knows neither Express nor a database.' }] },
      ],
    },
  },
  {
    files: ['handlers/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['express*', ...databases], message: 'Handlers get typed input and call the domain: no Express, no database.' },
          ],
        },
      ],
    },
  },
  {
    // contract/ is a package of its own (contract/package.json), installed without the service.
    files: ['contract/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['../*', '!../package.json', 'express*', 'better-sqlite3', 'pg', 'drizzle-orm*', 'supertest'],
              message: 'contract/ is a package of its own: it imports only itself, node:, and the dependencies in contract/package.json.',
            },
          ],
        },
      ],
    },
  },
  {
    // Tests and the contract suite read response bodies and the spec as untyped JSON on
    // purpose, and check them at run time (expect, ajv); typing every read adds nothing.
    files: ['tests/**', 'contract/**'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-base-to-string': 'off',
    },
  },
  {
    // The body reader looks for U+0000 on purpose (PostgreSQL text cannot hold it; openapi.yaml, "Text").
    files: ['server/pipeline/body.ts'],
    rules: { 'no-control-regex': 'off' },
  },
  {
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    extends: [tseslint.configs.disableTypeChecked],
  },
  {
    // Served to the browser by /docs.
    files: ['server/pages/docs-assets/**/*.js'],
    languageOptions: { globals: { document: 'readonly', window: 'readonly' } },
  },
  {
    files: ['jest.config.js', 'jest.*.config.js'],
    languageOptions: { sourceType: 'commonjs', globals: { module: 'writable' } },
  },
  {
    // The checkpoint, hashing and tracing threads' bodies, the bundle's entry and the runtime choice:
    // plain CommonJS, so node runs them as they are.
    files: [
      'db/checkpoint-worker.cjs',
      'server/security/hash-worker.cjs',
      'server/observability/trace-worker.cjs',
      'server/entry.cjs',
      'scripts/runtime.cjs',
    ],
    languageOptions: {
      sourceType: 'commonjs',
      globals: {
        require: 'readonly',
        module: 'writable',
        process: 'readonly',
        __dirname: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
      },
    },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // Test fixtures run by node as they are: preloaded into a real server process
    // (NODE_OPTIONS=--require), or run on the shipped runtime (sqlite-statement-gc.cjs).
    files: ['tests/fixtures/*.cjs'],
    languageOptions: {
      sourceType: 'commonjs',
      globals: {
        process: 'readonly',
        setImmediate: 'readonly',
        setTimeout: 'readonly',
        require: 'readonly',
        __filename: 'readonly',
        console: 'readonly',
      },
    },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
