// Code lint for the TypeScript sources (`npm run lint:code`); the spec has its own lint
// (`npm run lint:spec`, redocly.yaml). typescript-eslint's type-aware recommended rules,
// with the exceptions below, each with its reason.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

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
  // The layers (docs/layout.md): the domain knows neither HTTP nor a database; handlers
  // get the domain (ctx.repos), never the storage under it.
  {
    files: ['domain/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/server/**', '**/db/**', '**/handlers/**', 'express', 'pg', 'better-sqlite3', 'drizzle-orm*'],
              message: 'domain/ knows neither HTTP nor a database: it works over the storage port (domain/storage.ts).',
            },
          ],
        },
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
            {
              group: ['**/db/**', '**/domain/storage', 'pg', 'better-sqlite3', 'drizzle-orm*'],
              message: 'Handlers call the domain (ctx.repos), not the storage or a database.',
            },
          ],
        },
      ],
    },
  },
  {
    // scripts/ ships to operators: it may not depend on the suite's helpers.
    files: ['scripts/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['**/tests/**'], message: 'contract/ and scripts/ import no test helpers (docs/layout.md).' }] },
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
    files: ['server/body.ts'],
    rules: { 'no-control-regex': 'off' },
  },
  {
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    extends: [tseslint.configs.disableTypeChecked],
  },
  {
    // Served to the browser by /docs.
    files: ['server/docs-assets/**/*.js'],
    languageOptions: { globals: { document: 'readonly', window: 'readonly' } },
  },
  {
    files: ['jest.config.js', 'jest.*.config.js'],
    languageOptions: { sourceType: 'commonjs', globals: { module: 'writable' } },
  },
  {
    // The checkpoint and hashing threads' bodies, the bundle's entry and the runtime choice:
    // plain CommonJS, so node runs them as they are.
    files: ['db/checkpoint-worker.cjs', 'server/hash-worker.cjs', 'server/entry.cjs', 'scripts/runtime.cjs'],
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
