// Tests that only mean something on Linux (/proc, thread priorities, a tmpfs, Debian's
// packages): elsewhere they are skipped, and the skipped test's name says why, so that a
// run on macOS or Windows lists them as skipped with their reason instead of failing.
const linux = process.platform === 'linux';
const skipped = (name: string, reason: string) => `${name} [skipped: Linux only, ${reason}]`;

/** A describe whose tests need Linux; `reason` names what they need there. */
export function describeOnLinux(reason: string, name: string, fn: () => void): void {
  if (linux) describe(name, fn);
  else describe.skip(skipped(name, reason), fn);
}

/** A test that needs Linux; `reason` names what it needs there. */
export function itOnLinux(reason: string, name: string, fn: jest.ProvidesCallback, timeout?: number): void {
  if (linux) it(name, fn, timeout);
  else it.skip(skipped(name, reason), fn, timeout);
}
