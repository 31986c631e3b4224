// `npm start` loads TypeScript through server/register-ts.cjs: stack traces name the
// lines of the .ts source, though Node's own source-map support stays off.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from './server-process';

it('maps the frames of a .ts file to its own lines, and leaves other frames as they are', () => {
  const dir = mkdtempSync(join(tmpdir(), 'register-ts-'));
  try {
    const file = join(dir, 'boom.ts');
    writeFileSync(
      file,
      [
        'interface Box { value: number }', // 1
        '', // 2
        'function open(box: Box): number {', // 3
        '  if (box.value > 0) throw new Error(`boom ${box.value}`);', // 4
        '  return box.value;', // 5
        '}', // 6
        'try {', // 7
        '  [1].map((value) => open({ value }));', // 8
        '} catch (error) {', // 9
        '  console.log((error as Error).stack);', // 10
        '}', // 11
      ].join('\n'),
    );
    const stack = execFileSync(process.execPath, ['-r', './server/register-ts.cjs', file], { cwd: repoRoot, encoding: 'utf8' });
    const lines = stack.trim().split('\n');
    expect(lines[0]).toBe('Error: boom 1');
    expect(lines[1]).toBe(`    at open (${file}:4:28)`);
    expect(lines[2]).toBe(`    at ${file}:8:22`);
    // A frame outside the .ts files (Array.prototype.map) is printed as V8 prints it.
    expect(lines[3]).toBe('    at Array.map (<anonymous>)');
    expect(lines[4]).toBe(`    at Object.<anonymous> (${file}:8:7)`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
