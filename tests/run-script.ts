// Runs one of scripts/ under tsx in a folder of a test's own, as npm would, and resolves
// with its exit code and output (tests/spec-breaking.test.ts, tests/spec-changelog.test.ts).
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { repoRoot } from '../scripts/server-process';

/** Far past what one run takes on a loaded machine (a few seconds). */
const hungMs = 45_000;

export interface ScriptRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * `node --import tsx scripts/<script> ...args` in `cwd`. Node can deadlock at exit, its
 * output written (a V8 compile task waits for a GC the exiting main thread never runs:
 * nodejs/node#54918, seen here about once in a hundred runs): such a run is killed at
 * hungMs and run once more, as it changes nothing.
 */
export async function runScript(cwd: string, script: string, ...args: string[]): Promise<ScriptRun> {
  const once = () =>
    promisify(execFile)(process.execPath, ['--import', 'tsx', join(repoRoot, 'scripts', script), ...args], {
      cwd,
      timeout: hungMs,
      killSignal: 'SIGKILL',
    }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr, hung: false }),
      (error: { code: number | null; killed?: boolean; stdout: string; stderr: string }) => ({
        code: error.code ?? -1,
        stdout: error.stdout,
        stderr: error.stderr,
        hung: error.killed === true,
      }),
    );
  const first = await once();
  const { hung, ...run } = first.hung ? await once() : first;
  if (hung) throw new Error(`scripts/${script} did not exit within ${hungMs} ms, twice`);
  return run;
}
