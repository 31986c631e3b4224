// The files the service reads at run time. They are named from the folder above this one:
// the project's root when running from source, and dist/ when running the build, whose
// single bundle (dist/server/service.js) sits one folder down as this file does and has these
// files copied beside it under the same paths (scripts/build.mjs). A module in a folder
// below this one takes its paths from here rather than from its own folder.
import { join } from 'node:path';

const root = join(__dirname, '..');

/** openapi.yaml as JSON, written by `npm run generate`. */
export const specJsonFile = join(root, 'generated', 'openapi.json');
/** openapi.yaml as written, served at /openapi.yaml. */
export const specYamlFile = join(root, 'openapi.yaml');
export const hashWorkerFile = join(root, 'server', 'security', 'hash-worker.cjs');
export const traceWorkerFile = join(root, 'server', 'observability', 'trace-worker.cjs');
export const docsAssetsFolder = join(root, 'server', 'pages', 'docs-assets');
