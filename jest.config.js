/** @type {import('jest').Config} */
module.exports = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  roots: ['<rootDir>/tests'],
  testMatch: ['**/*.test.ts'],
  // The fault suite (a full disk, a database restart, kill -9) runs on its own:
  // `npm run test:faults`, as root beside a PostgreSQL (jest.faults.config.js).
  // So does the Prometheus suite (`npm run test:prometheus`, jest.prometheus.config.js).
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/tests/faults/', '<rootDir>/tests/prometheus/'],
  globalSetup: '<rootDir>/tests/global-setup.ts',
  // Each file builds its own app and database; a few tests start real servers.
  testTimeout: 30_000,
};
