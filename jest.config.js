/** @type {import('jest').Config} */
module.exports = {
  // ts-jest only transpiles, file by file (tsconfig.json's isolatedModules): `npm run
  // typecheck` checks the types, tests included.
  preset: 'ts-jest',
  testEnvironment: 'node',
  roots: ['<rootDir>/tests'],
  testMatch: ['**/*.test.ts'],
  // The system tests (tests/system/: build, dev, packs, a copy of the project through the
  // contract loop) run on their own, `npm run test:system` (jest.system.config.js).
  // So does the fault suite (a full disk, a database restart, kill -9): `npm run test:faults`,
  // as root beside a PostgreSQL (jest.faults.config.js). And the Prometheus suite
  // (`npm run test:prometheus`, jest.prometheus.config.js).
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/tests/system/', '<rootDir>/tests/faults/', '<rootDir>/tests/prometheus/'],
  globalSetup: '<rootDir>/tests/global-setup.ts',
  // A worker per core: jest's default leaves one core to itself, a single worker on two.
  maxWorkers: '100%',
  // Each file builds its own app and database; a few tests start real servers.
  testTimeout: 30_000,
};
