// The fault suite: real faults against a real server process on the shipped path (a
// SQLite file on a real, small disk; a real PostgreSQL that is stopped and started).
// It mounts a tmpfs, so it runs as root; .ci/run runs it under scripts/with-postgres.sh.
/** @type {import('jest').Config} */
module.exports = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  roots: ['<rootDir>/tests/faults'],
  testMatch: ['**/*.test.ts'],
  globalSetup: '<rootDir>/tests/global-setup.ts',
  testTimeout: 120_000,
};
