// Tests that only mean something on some systems (Linux's /proc and tmpfs, loopback
// addresses past 127.0.0.1, Debian's packages, bash): elsewhere they are skipped, and the
// skipped test's name says why, so that a run on macOS or Windows lists them as skipped
// with their reason instead of failing.
import { existsSync } from 'node:fs';

const linux = process.platform === 'linux';
/** Debian or a derivative (Ubuntu), whose packages (apt-get) some CI suites install. */
const debian = linux && existsSync('/etc/debian_version');
const posix = process.platform !== 'win32';

type Body = () => void;

function describeWhere(runs: boolean, only: string, reason: string, name: string, fn: Body): void {
  if (runs) describe(name, fn);
  else describe.skip(`${name} [skipped: ${only} only, ${reason}]`, fn);
}

function itWhere(runs: boolean, only: string, reason: string, name: string, fn: jest.ProvidesCallback, timeout?: number): void {
  if (runs) it(name, fn, timeout);
  else it.skip(`${name} [skipped: ${only} only, ${reason}]`, fn, timeout);
}

/** A describe whose tests need Linux; `reason` names what they need there. */
export const describeOnLinux = (reason: string, name: string, fn: Body) => describeWhere(linux, 'Linux', reason, name, fn);

/** A test that needs Linux; `reason` names what it needs there. */
export const itOnLinux = (reason: string, name: string, fn: jest.ProvidesCallback, timeout?: number) =>
  itWhere(linux, 'Linux', reason, name, fn, timeout);

/** A describe whose tests need Debian's packages; `reason` names them. */
export const describeOnDebian = (reason: string, name: string, fn: Body) => describeWhere(debian, 'Debian', reason, name, fn);

/** A describe whose tests need a POSIX system (Linux, macOS); `reason` names what they need. */
export const describeOnPosix = (reason: string, name: string, fn: Body) => describeWhere(posix, 'Linux and macOS', reason, name, fn);
