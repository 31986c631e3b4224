// The Prometheus suite: a real Prometheus and promtool (Debian's package, installed by
// scripts/ensure-prometheus.sh) against the built service. `npm run test:prometheus`;
// .ci/run installs the package, then runs it.
/** @type {import('jest').Config} */
module.exports = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  roots: ['<rootDir>/tests/prometheus'],
  testMatch: ['**/*.test.ts'],
  globalSetup: '<rootDir>/tests/global-setup.ts',
  testTimeout: 60_000,
};
