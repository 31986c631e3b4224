// The types of runtime.cjs, for the TypeScript that imports it (tests/runtime-choice.test.ts).
export interface PackageJson {
  name: string;
  engines: { node: string };
  optionalDependencies?: Record<string, string>;
}

export interface Machine {
  platform: string;
  arch: string;
  /** The Node.js running now: `process.version`. */
  nodeVersion: string;
  pkg: PackageJson;
}

export type Runtime =
  | { use: 'package'; name: string; version: string; refuse?: undefined }
  | { use: 'machine'; refuse?: undefined }
  | { use?: undefined; refuse: string };

export function runtimePackage(platform: string, arch: string): string;
export function supports(range: string, version: string): boolean;
export function chooseRuntime(machine: Machine): Runtime;
export function startRefusal(machine: Machine): string | undefined;
