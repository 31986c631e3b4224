import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import express from 'express';
import { docsAssetsFolder } from '../files';
import { precompressed } from './precompressed';

// Every byte the page needs comes from this process: the reference must work on
// a machine with no internet access, and an accidental CDN link must fail
// loudly in development rather than silently in production. Swagger UI's
// stylesheet embeds its icons as data: URIs and its components set inline
// style attributes, hence the two exceptions.
const DOCS_CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'self'",
].join('; ');

// Only the files the page uses: swagger-ui-dist also ships an index.html and an
// initializer that point at a public demo spec, which we never want to serve.
const SWAGGER_UI_FILES = new Set(['swagger-ui-bundle.js', 'swagger-ui.css', 'favicon-16x16.png', 'favicon-32x32.png']);

const swaggerUiDir = path.dirname(require.resolve('swagger-ui-dist/package.json'));

// The page's own files (docs-assets/).
const DOCS_FILES = ['docs.css', 'docs.js'];

const typeOf = (file: string) =>
  file.endsWith('.js')
    ? 'text/javascript; charset=utf-8'
    : file.endsWith('.css')
      ? 'text/css; charset=utf-8'
      : file.endsWith('.png')
        ? 'image/png'
        : 'application/octet-stream';

export function createDocsRouter(spec: Record<string, unknown>): express.Router {
  checkTagParents(spec);
  const page = renderPage(titleOf(spec));
  const router = express.Router({ caseSensitive: true, strict: true });

  router.use('/docs', (_req, res, next) => {
    res.setHeader('Content-Security-Policy', DOCS_CONTENT_SECURITY_POLICY);
    res.setHeader('X-Content-Type-Options', 'nosniff');
    next();
  });

  router.get('/docs', (_req, res) => {
    res.type('html').send(page);
  });

  // Each file served precompressed (br, gzip) with an ETag; a Range request from the file
  // itself, by `send` (express.static), which answers 206 and 416.
  const files = [
    ...DOCS_FILES.map((file) => ({ file, root: docsAssetsFolder })),
    ...[...SWAGGER_UI_FILES].map((file) => ({ file, root: swaggerUiDir })),
  ];
  for (const { file, root } of files) {
    const full = path.join(root, file);
    router.get(
      `/docs/assets/${file}`,
      precompressed({
        type: typeOf(file),
        read: () => readFileSync(full),
        modified: () => statSync(full).mtime,
        ranges: (_req, res, next) => res.sendFile(file, { root, etag: false }, (error) => error && next(error)),
      }),
    );
  }
  return router;
}

// The page groups child tags under the tag named in their x-parent; a typo there
// would silently drop the group, so refuse to start instead.
function checkTagParents(spec: Record<string, unknown>): void {
  const tags = Array.isArray(spec.tags) ? (spec.tags as Array<Record<string, unknown>>) : [];
  const names = new Set(tags.map((tag) => tag.name));
  for (const tag of tags) {
    const parent = tag['x-parent'];
    if (parent !== undefined && (typeof parent !== 'string' || !names.has(parent))) {
      throw new Error(`Tag "${String(tag.name)}" has x-parent ${JSON.stringify(parent)}, which is not a declared tag`);
    }
  }
}

function titleOf(spec: Record<string, unknown>): string {
  const info = spec.info as { title?: unknown } | undefined;
  return typeof info?.title === 'string' ? info.title : 'API reference';
}

function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function renderPage(title: string): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>${escapeHtml(title)} - API reference</title>
  <link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png" sizes="32x32">
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
  <link rel="stylesheet" href="/docs/assets/docs.css">
</head>
<body>
  <div id="swagger-ui" data-spec-url="/openapi.json"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/assets/docs.js"></script>
</body>
</html>
`;
}
