// The system tests: what builds, packs or copies the project (the build, `npm run dev`, the
// contract loop of docs/contract.md, the packed client and contract suite). `npm run
// test:system` runs them one file at a time, since some copy the working tree while
// another packs into it (client/dist, contract/dist); .ci/run runs it after `npm test`.
/** @type {import('jest').Config} */
module.exports = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  roots: ['<rootDir>/tests/system'],
  testMatch: ['**/*.test.ts'],
  globalSetup: '<rootDir>/tests/global-setup.ts',
  testTimeout: 30_000,
};
