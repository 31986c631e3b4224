// express-openapi-validator is pinned and carried with patches/express-openapi-validator+<version>.patch,
// applied at install by patch-package (postinstall) and by the build before it bundles: the route-matcher cache of upstream's
// pull request 1217 (cdimascio/express-openapi-validator), keyed by the route in a map per
// pair of routing flags rather than by a JSON string built per route and request; no OpenAPI meta-schema
// compile when `validateApiSpec` is false; no reference parser for a document its caller
// dereferenced (`$refParser: { mode: 'none' }`, server/spec.ts dereferenced()); a schema
// with no `$ref` handed to Ajv without the whole document around it, which Ajv walks for
// every schema it adds (each response of each operation); one response validator a schema
// (the Error body of every error code of every operation compiled once, not some hundred
// times); the document copied with V8's structured clone instead of lodash.clonedeep; multer
// (and the mime-types it brings) loaded by the first multipart middleware made, not by every
// app, the service's uploader being off; and the query string read without url.parse(),
// which Node 24 deprecates (DEP0169: a warning at the first request) and makes slow when
// called from node_modules. These fail when an upgrade drops the patch or the pin, so that
// the patch is either carried forward or deleted once upstream ships it.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as framework from 'express-openapi-validator/dist/framework';
import { OpenApiContext } from 'express-openapi-validator/dist/framework/openapi.context';
import { useAjvCache } from 'express-openapi-validator/dist/middlewares/util';
import { ResponseValidator } from 'express-openapi-validator/dist/middlewares/openapi.response.validator';
import Ajv from 'ajv';
import * as schemaValidator from 'express-openapi-validator/dist/framework/openapi.schema.validator';
import url from 'node:url';
import request from 'supertest';
import $RefParser from '@apidevtools/json-schema-ref-parser';
import { OpenAPITraverser } from '@useoptic/openapi-utilities';
import { createOperation } from '@useoptic/rulesets-base/build/rule-runner/data-constructors';
import { getEndpointKey, groupFacts } from '@useoptic/rulesets-base/build/rule-runner/group-facts';
import express from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import { dereferenced, loadSpec, type OpenApiDocument } from '../server/spec';
import { repoRoot } from '../scripts/server-process';
import { customer, setupApp } from './helpers';

const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));
const installed = JSON.parse(readFileSync(join(repoRoot, 'node_modules/express-openapi-validator/package.json'), 'utf8')).version;
const opticInstalled = JSON.parse(readFileSync(join(repoRoot, 'node_modules/@useoptic/rulesets-base/package.json'), 'utf8')).version;
const mimeTypesInstalled = JSON.parse(readFileSync(join(repoRoot, 'node_modules/mime-types/package.json'), 'utf8')).version;

describe('express-openapi-validator, as patched at install', () => {
  it('is the exact version the patch was made for', () => {
    expect(pkg.dependencies['express-openapi-validator']).toBe(installed);
    expect(readdirSync(join(repoRoot, 'patches')).sort()).toEqual([
      `@useoptic+rulesets-base+${opticInstalled}.patch`,
      `express-openapi-validator+${installed}.patch`,
      `mime-types+${mimeTypesInstalled}.patch`,
    ]);
    // Applied at install where patch-package is (the devDependencies), and before every bundle.
    // npm echoes the line at every install: it stays short (and a production install, without patch-package, skips it).
    expect(pkg.scripts.postinstall).toContain("try { require.resolve('patch-package') } catch { process.exit() }");
    expect(pkg.scripts.postinstall).toContain("'patch-package', '--error-on-fail', '--error-on-warn'); require('patch-package')");
    expect(pkg.scripts.postinstall.length).toBeLessThan(200);
  });

  it('compiles each route matcher once and hands the same one back', () => {
    const context = new OpenApiContext({ apiDoc: {}, basePaths: [], routes: [], serial: 0 } as never, /^$/) as OpenApiContext & {
      getRouteMatcher?: (route: string, strict: boolean, sensitive: boolean) => { regexp: RegExp; paramKeys: string[] };
    };
    expect(typeof context.getRouteMatcher).toBe('function');
    const matcher = context.getRouteMatcher!('/pets/:petId', true, true);
    expect(matcher.paramKeys).toEqual(['petId']);
    expect(matcher.regexp.exec('/pets/7')?.[1]).toBe('7');
    expect(context.getRouteMatcher!('/pets/:petId', true, true)).toBe(matcher);
    expect(context.getRouteMatcher!('/pets/:petId', false, true)).not.toBe(matcher);
  });

  it('builds the OpenAPI schema validator only when it is to check the document', async () => {
    const Original = schemaValidator.OpenAPISchemaValidator;
    const built = jest.spyOn(schemaValidator, 'OpenAPISchemaValidator').mockImplementation(function (opts) {
      return new Original(opts);
    });
    try {
      await new framework.OpenAPIFramework({ apiDoc: loadSpec() as never, validateApiSpec: false }).initialize({});
      expect(built).not.toHaveBeenCalled();
      await new framework.OpenAPIFramework({ apiDoc: loadSpec() as never, validateApiSpec: true }).initialize({});
      expect(built).toHaveBeenCalledTimes(1);
    } finally {
      built.mockRestore();
    }
  });

  it("takes a document its caller dereferenced as it is, with mode 'none'", async () => {
    const doc = dereferenced(loadSpec());
    const none = await new framework.OpenAPIFramework({
      apiDoc: doc as never,
      validateApiSpec: false,
      $refParser: { mode: 'none' },
    }).initialize({});
    expect(none.apiDoc).toBe(doc);
    // The same document as the parser's own dereference makes of it.
    const parsed = await new framework.OpenAPIFramework({
      apiDoc: loadSpec() as never,
      validateApiSpec: false,
      $refParser: { mode: 'dereference' },
    }).initialize({});
    expect(parsed.apiDoc).toEqual(doc);
    expect(JSON.stringify(doc)).not.toContain('"$ref"');
  });

  it('adds a schema with no $ref to Ajv without the document it carries, and one with a $ref with it', () => {
    const doc = dereferenced(loadSpec()) as { paths: object; components: object };
    const ajv = new Ajv({ strict: false });
    const added = jest.spyOn(ajv, 'addSchema');
    const own = { properties: { name: { type: 'string' } } };
    const check = useAjvCache(ajv, { paths: doc.paths, components: doc.components, ...own }, 'plain');
    expect(added.mock.calls[0]?.[0]).toEqual(own);
    expect(check?.({ name: 'Rex' })).toBe(true);
    expect(check?.({ name: 7 })).toBe(false);
    // A reference into the document still finds it there.
    const components = { schemas: { Name: { type: 'string' } } };
    const withRef = { paths: {}, components, properties: { name: { $ref: '#/components/schemas/Name' } } };
    const refCheck = useAjvCache(ajv, withRef, 'ref');
    expect(added.mock.calls[1]?.[0]).toBe(withRef);
    expect(refCheck?.({ name: 7 })).toBe(false);
  });

  it('compiles one response validator a schema, however many responses name it', () => {
    const doc = dereferenced(loadSpec()) as { paths: Record<string, Record<string, { responses: Record<string, object> }>> };
    const validator = new ResponseValidator(doc as never, { formats: {}, strict: false }) as unknown as {
      ajvBody: Ajv;
      buildValidators: (responses: object, key: string) => Record<string, Record<string, unknown>>;
    };
    const added = jest.spyOn(validator.ajvBody, 'addSchema');
    const pets = validator.buildValidators(doc.paths['/pets']!.get!.responses, 'listPets');
    const pet = validator.buildValidators(doc.paths['/pets/{petId}']!.get!.responses, 'getPet');
    const json = 'application/json';
    // The Error body of the 400, 401 and 429 of one operation, and of another's 404: one validator.
    expect(pets['400']?.[json]).toBeDefined();
    expect(pets['401']?.[json]).toBe(pets['400']?.[json]);
    expect(pet['404']?.[json]).toBe(pets['400']?.[json]);
    expect(pet['200']?.[json]).not.toBe(pets['200']?.[json]);
    // Each schema added once: the two 200s and one Error.
    expect(added).toHaveBeenCalledTimes(new Set([...Object.values(pets), ...Object.values(pet)].map((v) => v[json])).size);
    // Still a check: the Error validator refuses a body without its fields.
    const check = pet['404']?.[json] as (data: unknown) => boolean;
    expect(check({ response: { code: 'not_found', message: 'Pet 1 was not found', status: 404 } })).toBe(true);
    expect(check({ response: { message: 'no code' } })).toBe(false);
  });

  it("copies the document with V8's structured clone: the caller's stays as given, shared objects shared", async () => {
    const doc = dereferenced(loadSpec()) as { components: { schemas: Record<string, object> } } & OpenApiDocument;
    const petSchema = (d: typeof doc) =>
      (d.paths['/pets/{petId}']!.get as { responses: Record<string, { content: Record<string, { schema: object }> }> }).responses['200']!
        .content['application/json']!.schema;
    // dereferenced() leaves one object however often it is named.
    expect(petSchema(doc)).toBe(doc.components.schemas.Pet);
    const cloned = jest.spyOn(globalThis, 'structuredClone');
    try {
      const app = express();
      const validator = OpenApiValidator.middleware({
        apiSpec: doc as never,
        validateApiSpec: false,
        $refParser: { mode: 'none' },
        validateResponses: true,
      });
      app.use(validator as unknown as express.RequestHandler[]);
      app.get('/pets/:petId', (_req, res) => {
        res.json({ id: 1, name: 'Rex', status: 'available' });
      });
      // The validator sets itself up before it lets the first request through.
      await request(app).get('/pets/1');
      expect(cloned).toHaveBeenCalledWith(doc);
      const copy = cloned.mock.results.find((r, i) => cloned.mock.calls[i]![0] === doc)!.value as typeof doc;
      expect(copy).not.toBe(doc);
      expect(petSchema(copy)).toBe(copy.components.schemas.Pet);
      // What the validator annotates and prunes is its copy: ours is as it was loaded.
      expect(doc).toEqual(dereferenced(loadSpec()));
    } finally {
      cloned.mockRestore();
    }
  });

  it('loads multer when it makes a multipart middleware, not when it is loaded', () => {
    // A process of its own: this one has loaded the validator (and perhaps multer) already.
    const script = `
      const loaded = () => Object.keys(require.cache).some((file) => file.includes('/node_modules/multer/'));
      require('express-openapi-validator');
      const before = loaded();
      require('express-openapi-validator/dist/middlewares').multipart(
        { openapi: '3.0.3', info: { title: 'x', version: '1' }, paths: {} },
        { multerOpts: {}, ajvOpts: { formats: {} } },
      );
      console.log(JSON.stringify({ before, after: loaded() }));`;
    const out = execFileSync(process.execPath, ['-e', script], { cwd: repoRoot, encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual({ before: false, after: true });
  });

  it('reads the query string without url.parse()', async () => {
    const t = setupApp();
    const me = await customer(t.app);
    const parse = jest.spyOn(url, 'parse');
    try {
      const res = await request(t.app).get('/pets?limit=2&status=available').set(me.auth);
      expect(res.status).toBe(200);
      expect(parse).not.toHaveBeenCalled();
    } finally {
      parse.mockRestore();
    }
  });
});

// Optic's rule runner (@useoptic/rulesets-base, what `npm run spec:breaking` runs), a
// devDependency pinned and carried with patches/@useoptic+rulesets-base+<version>.patch:
// its data constructors build each view of an operation once per node, side and document,
// where the runner rebuilt the whole operation (every response and property in it) once per
// response and per rule.
describe("Optic's rule runner, as patched at install", () => {
  it('is the exact version the patch was made for', () => {
    expect(pkg.devDependencies['@useoptic/rulesets-base']).toBe(opticInstalled);
  });

  it('builds the view of an operation once per side and document, and hands the same one back', async () => {
    const doc = await $RefParser.dereference<Record<string, unknown>>(loadSpec() as never);
    const traverser = new OpenAPITraverser();
    traverser.traverse(doc as never);
    const facts = [...traverser.facts()];
    const grouped = groupFacts({ beforeFacts: facts, afterFacts: facts, changes: [] });
    const endpoint = grouped.endpoints.get(getEndpointKey({ method: 'get', path: '/pets' }))!;
    const view = createOperation(endpoint, 'after', doc as never)!;
    expect(view.path).toBe('/pets');
    expect(view.responses.get('200')).toBeDefined();
    expect(createOperation(endpoint, 'after', doc as never)).toBe(view);
    expect(createOperation(endpoint, 'before', doc as never)).not.toBe(view);
    const other = structuredClone(doc);
    expect(createOperation(endpoint, 'after', other as never)).not.toBe(view);
    expect(createOperation(endpoint, 'after', other as never)).toEqual(view);
  });
});

// mime-types (Express's, 3.x), carried with patches/mime-types+<version>.patch: its maps of
// extensions to types and back, which it built at require by walking all of mime-db and
// scoring each extension's candidates, are built at their first use. Express loads it in
// every app; the service never looks an extension up before its first answer.
describe('mime-types, as patched at install', () => {
  it('builds its maps at their first use, with what it built at require', () => {
    const script = `
      const mime = require('mime-types');
      const lazy = typeof Object.getOwnPropertyDescriptor(mime, 'types').get === 'function';
      const before = mime._extensionConflicts.length;
      const answers = [mime.lookup('json'), mime.lookup('page.html'), mime.lookup('x.mp4'), mime.types.js,
        mime.extension('application/json'), mime.contentType('json'), Object.keys(mime.types).length > 1000,
        Object.keys(mime.extensions).length > 1000];
      mime.types = { own: 'text/own' };
      console.log(JSON.stringify({ lazy, before, answers, set: mime.lookup('a.own') }));`;
    const out = execFileSync(process.execPath, ['-e', script], { cwd: repoRoot, encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual({
      lazy: true,
      before: 0,
      answers: ['application/json', 'text/html', 'video/mp4', 'text/javascript', 'json', 'application/json; charset=utf-8', true, true],
      set: 'text/own',
    });
  });
});
