// The files the storage reads at run time. They are named from the folder above this one:
// the project's root when running from source, and dist/ when running the build, whose
// single bundle (dist/server/service.js) sits one folder down as this file does and has these
// files copied beside it (scripts/build.mjs). A module deeper than this one takes its
// paths from here rather than from its own folder.
import { join } from 'node:path';

const root = join(__dirname, '..');

export const sqliteMigrationsFolder = join(root, 'db', 'migrations');
export const pgMigrationsFolder = join(root, 'db', 'pg', 'migrations');
export const checkpointWorkerFile = join(root, 'db', 'checkpoint-worker.cjs');
