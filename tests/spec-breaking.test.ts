// The breaking-change gate (`npm run spec:breaking`): each kind of change that breaks a
// client of the previous openapi.yaml fails and is named; additions pass.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse, stringify } from 'yaml';
import { breakingChanges, correctionsFile, parseCorrections, type Correction } from '../scripts/spec-breaking';
import { repoRoot } from '../scripts/server-process';
import { runScript } from './run-script';

// The spec as plain data, edited in place by each case.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the cases reach into arbitrary depths of openapi.yaml
type Doc = Record<string, any>;
const spec = (): Doc => parse(readFileSync(join(repoRoot, 'openapi.yaml'), 'utf8'));
const changed = (edit: (doc: Doc) => void): Doc => {
  const doc = spec();
  edit(doc);
  return doc;
};

jest.setTimeout(120_000);

describe('breakingChanges', () => {
  const breaks: Array<[string, (doc: Doc) => void, RegExp]> = [
    [
      'an operation removed',
      (d) => delete d.paths['/categories/{categoryId}'].delete,
      /^DELETE \/categories\/\{categoryId\}: cannot remove an operation/,
    ],
    [
      'a response field removed',
      (d) => delete d.components.schemas.Category.properties.description,
      /GET \/categories\/\{categoryId\} response 200 .*description: cannot remove response property 'description'/,
    ],
    [
      'an enum value removed',
      (d) => (d.components.schemas.PetStatus.enum = ['available', 'pending']),
      /GET \/pets query parameter: status: cannot remove enum option 'sold'/,
    ],
    [
      'a status removed',
      (d) => delete d.paths['/categories/{categoryId}'].get.responses['404'],
      /GET \/categories\/\{categoryId\} response 404: must not remove response status code 404/,
    ],
    [
      'a request field made required',
      (d) => (d.components.schemas.NewCategory.required = ['name', 'description']),
      /POST \/categories request body.*description: cannot make a request property required/,
    ],
    [
      'a type narrowed',
      (d) => (d.components.schemas.NewCategory.properties.description.type = 'integer'),
      /POST \/categories request body.*'description' not to be narrowed/,
    ],
    [
      'a format narrowed',
      (d) => (d.components.schemas.Id.format = 'int32'),
      /POST \/pets application\/json categoryId: format changed from int64 to int32/,
    ],
    [
      'an enum value removed behind allOf in a request body (a shared enum under a description)',
      (d) => (d.components.schemas.PetStatus.enum = ['available', 'pending']),
      /^POST \/pets request body status: cannot remove enum option 'sold'$/,
    ],
    [
      "a request string's maxLength narrowed",
      (d) => (d.components.schemas.NewCategory.properties.name.maxLength = 50),
      /^POST \/categories request body name: cannot narrow maxLength from 100 to 50$/,
    ],
    [
      "a request number's maximum narrowed",
      (d) => (d.components.schemas.NewOrder.properties.quantity.maximum = 10),
      /^POST \/store\/orders request body quantity: cannot narrow maximum from 1000 to 10$/,
    ],
    [
      "a query parameter's maximum narrowed",
      (d) => (d.components.parameters.Limit.schema.maximum = 50),
      /^GET \/pets query parameter limit: cannot narrow maximum from 100 to 50$/,
    ],
    [
      'a request string given a minLength',
      (d) => (d.components.schemas.NewCategory.properties.description.minLength = 3),
      /^POST \/categories request body description: cannot narrow minLength from none to 3$/,
    ],
    [
      'a request field removed (request bodies refuse unknown properties)',
      (d) => delete d.components.schemas.NewCategory.properties.description,
      /^POST \/categories request body description: cannot remove request property 'description' \(unknown properties are refused\)$/,
    ],
    [
      'a query parameter removed (unknown query parameters are refused)',
      (d) => (d.paths['/store/orders'].get.parameters = d.paths['/store/orders'].get.parameters.filter((p: Doc) => p.name !== 'complete')),
      /^GET \/store\/orders query parameter complete: cannot remove query parameter 'complete' \(unknown query parameters are refused\)$/,
    ],
    [
      'a required parameter added',
      (d) => d.paths['/categories'].get.parameters.push({ name: 'q', in: 'query', required: true, schema: { type: 'string' } }),
      /GET \/categories query parameter: q: cannot add required query parameter q/,
    ],
  ];

  it.each(breaks)('names %s', async (_kind, edit, expected) => {
    const { breaks: found } = await breakingChanges(spec(), changed(edit));
    expect(found).toEqual(expect.arrayContaining([expect.stringMatching(expected)]));
  });

  it('names an enum value removed behind oneOf in a request body', async () => {
    const oneOf = (d: Doc) =>
      (d.components.schemas.NewPet.properties.status = { oneOf: [{ $ref: '#/components/schemas/PetStatus' }, { type: 'integer' }] });
    const found = await breakingChanges(
      changed(oneOf),
      changed((d) => {
        oneOf(d);
        d.components.schemas.PetStatus.enum = ['available', 'pending'];
      }),
    );
    // Optic's own line for it says the value was added; this one says what a client meets.
    expect(found.breaks).toEqual(expect.arrayContaining(["POST /pets request body status oneOf[0]: cannot remove enum option 'sold'"]));
  });

  it('names an enum value removed from a request body enum of its own once, as Optic words it', async () => {
    const own = (values: string[]) => (d: Doc) => (d.components.schemas.NewPet.properties.status = { type: 'string', enum: values });
    const found = await breakingChanges(changed(own(['available', 'pending', 'sold'])), changed(own(['available', 'pending'])));
    expect(found.breaks.filter((line) => line.startsWith('POST /pets ') && line.includes("'sold'"))).toEqual([
      "POST /pets request body: application/json property: status: cannot remove enum option 'sold' from 'status' property.",
    ]);
  });

  it('passes widened request bounds and narrowed response-only bounds', async () => {
    const found = await breakingChanges(
      spec(),
      changed((d) => {
        d.components.schemas.NewCategory.properties.name.maxLength = 200;
        d.components.schemas.NewOrder.properties.quantity.maximum = 5000;
        d.components.parameters.Limit.schema.minimum = 0;
      }),
    );
    expect(found.breaks).toEqual([]);
  });

  it('passes additions: an optional request field, a response field, an optional parameter, an operation, an enum value', async () => {
    const found = await breakingChanges(
      spec(),
      changed((d) => {
        d.components.schemas.NewCategory.properties.colour = { type: 'string', maxLength: 20 };
        d.components.schemas.Category.properties.colour = { type: 'string', maxLength: 20 };
        d.paths['/categories'].get.parameters.push({ name: 'q', in: 'query', schema: { type: 'string' } });
        d.paths['/toys'] = { get: { operationId: 'listToys', tags: ['toys'], responses: { '200': { description: 'The toys.' } } } };
        d.components.schemas.Error.properties.code.enum.push('teapot');
      }),
    );
    // A new response enum value is noted, not refused (clients read an unknown code by status).
    expect(found).toEqual({
      breaks: [],
      notes: expect.arrayContaining([expect.stringMatching(/GET \/pets response 400 .*code: cannot add enum option/)]),
      accepted: [],
    });
  });
});

describe('breakingChanges with corrections to the interface', () => {
  // A made-up correction: Category's `name` dropped from `required`. Both sides of each case
  // are set explicitly, so the cases hold whatever openapi.yaml's lists are today.
  const rule = 'cannot make required response property';
  const correction: Correction = {
    schema: 'Category',
    rule,
    required: { was: ['id', 'name'], now: ['id'] },
    why: 'a test',
    interface: 'a test',
  };
  const requiring = (schema: string, required: string[] | undefined) => (d: Doc) => {
    if (required) d.components.schemas[schema].required = required;
    else delete d.components.schemas[schema].required;
  };
  const both =
    (...edits: Array<(d: Doc) => void>) =>
    (d: Doc) =>
      edits.forEach((edit) => edit(d));
  const before = changed(requiring('Category', ['id', 'name']));

  it('accepts the change a correction names, and lists it', async () => {
    const found = await breakingChanges(before, changed(requiring('Category', ['id'])), [correction]);
    expect(found.breaks).toEqual([]);
    expect(found.accepted).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^GET \/categories\/\{categoryId\} response 200 .*cannot make required response property 'name' optional/),
      ]),
    );
    expect(found.accepted.every((line) => line.includes("'name'"))).toBe(true);
  });

  it('still refuses the same kind of change to another schema made with it', async () => {
    const after = changed(both(requiring('Category', ['id']), requiring('InventoryItem', ['petId', 'quantity'])));
    const found = await breakingChanges(
      changed(both(requiring('Category', ['id', 'name']), requiring('InventoryItem', ['petId', 'quantity', 'status']))),
      after,
      [correction],
    );
    expect(found.breaks).toEqual(
      expect.arrayContaining([expect.stringMatching(/GET \/store\/inventory .*cannot make required response property 'status' optional/)]),
    );
    expect(found.breaks.some((line) => line.includes("'name'"))).toBe(false);
  });

  it('refuses a list that goes further than the correction: no part of it is accepted', async () => {
    const found = await breakingChanges(before, changed(requiring('Category', undefined)), [correction]);
    expect(found.accepted).toEqual([]);
    expect(found.breaks).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/cannot make required response property 'name' optional/),
        expect.stringMatching(/cannot make required response property 'id' optional/),
      ]),
    );
  });

  it('refuses the change when the correction names another rule', async () => {
    const found = await breakingChanges(before, changed(requiring('Category', ['id'])), [
      { ...correction, rule: 'cannot remove response property' },
    ]);
    expect(found.accepted).toEqual([]);
    expect(found.breaks).toEqual(expect.arrayContaining([expect.stringMatching(/cannot make required response property 'name' optional/)]));
  });
});

describe('breakingChanges with a pattern written down', () => {
  // A made-up entry: NewCategory's `name` given the pattern the service would already apply.
  const correction: Correction = {
    schema: 'NewCategory',
    rule: 'cannot change pattern',
    property: 'name',
    pattern: { was: null, now: '^[A-Za-z ]+$' },
    why: 'a test',
    interface: 'a test',
  };
  const patterned = (pattern: string | undefined) => (d: Doc) => {
    if (pattern === undefined) delete d.components.schemas.NewCategory.properties.name.pattern;
    else d.components.schemas.NewCategory.properties.name.pattern = pattern;
  };
  const before = changed(patterned(undefined));

  it('accepts exactly the pattern it names on exactly that property, and lists it', async () => {
    const found = await breakingChanges(before, changed(patterned('^[A-Za-z ]+$')), [correction]);
    expect(found.breaks).toEqual([]);
    expect(found.accepted).toEqual(
      expect.arrayContaining([expect.stringMatching(/^POST \/categories request body name: cannot change pattern/)]),
    );
  });

  it('refuses another pattern, or the same pattern on another property', async () => {
    const other = await breakingChanges(before, changed(patterned('^[a-z]+$')), [correction]);
    expect(other.accepted).toEqual([]);
    expect(other.breaks).toEqual(expect.arrayContaining([expect.stringMatching(/request body name: cannot change pattern/)]));
    const elsewhere = await breakingChanges(before, changed(patterned('^[A-Za-z ]+$')), [{ ...correction, property: 'description' }]);
    expect(elsewhere.accepted).toEqual([]);
    expect(elsewhere.breaks).toEqual(expect.arrayContaining([expect.stringMatching(/request body name: cannot change pattern/)]));
  });
});

describe(`the corrections committed in ${correctionsFile}`, () => {
  const committed = parseCorrections(readFileSync(join(repoRoot, correctionsFile), 'utf8'));
  // openapi.yaml as it was before the corrections: each entry's `was` list put back.
  const uncorrected = changed((d) => {
    for (const c of committed) {
      if ('required' in c) d.components.schemas[c.schema].required = c.required.was;
      else if (c.pattern.was === null) delete d.components.schemas[c.schema].properties[c.property].pattern;
      else d.components.schemas[c.schema].properties[c.property].pattern = c.pattern.was;
    }
  });

  it('accept the corrections they list, and nothing else: the same change to InventoryItem fails', async () => {
    const corrected = await breakingChanges(uncorrected, spec(), committed);
    expect(corrected.breaks).toEqual([]);
    expect(corrected.accepted).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^GET \/store\/orders\/\{orderId\} response 200 .*cannot make required response property 'id' optional/),
        expect.stringMatching(/^GET \/pets response 200 .*cannot make required response property 'status' optional/),
      ]),
    );

    const more = await breakingChanges(
      uncorrected,
      changed((d) => (d.components.schemas.InventoryItem.required = ['petId', 'quantity'])),
      committed,
    );
    expect(more.breaks).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^GET \/store\/inventory response 200 .*cannot make required response property 'status' optional/),
      ]),
    );
    expect(more.breaks.filter((line) => !/^\S+ \/store\/inventory.*'status'/.test(line))).toEqual([]);
  });
});

describe(`npm run spec:breaking -- --base REF, with ${correctionsFile}`, () => {
  let dir: string;
  const git = (...args: string[]) =>
    promisify(execFile)('git', ['-c', 'user.email=ci@example.com', '-c', 'user.name=ci', ...args], { cwd: dir });
  const commit = async (message: string) => {
    await git('add', '-A');
    await git('commit', '-q', '-m', message);
  };
  const run = () =>
    runScript(dir, 'spec-breaking.ts', '--base', 'HEAD~1').then(({ code, stdout, stderr }) => ({ code, out: stdout + stderr }));
  const write = (doc: Doc, corrections?: Correction[]) => {
    writeFileSync(join(dir, 'openapi.yaml'), stringify(doc));
    if (corrections) writeFileSync(join(dir, correctionsFile), stringify(corrections));
  };
  const withNameRequired = (required: boolean) =>
    changed((d) => (d.components.schemas.Category.required = required ? ['id', 'name'] : ['id']));
  const correction: Correction = {
    schema: 'Category',
    rule: 'cannot make required response property',
    required: { was: ['id', 'name'], now: ['id'] },
    why: 'a test',
    interface: 'a test',
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'petstore-corrections-'));
    symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'));
    mkdirSync(join(dir, 'docs'));
    await git('init', '-q');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('accepts a correction in the commit that adds its entry, and never again', async () => {
    write(withNameRequired(true), []);
    await commit('before');
    write(withNameRequired(false), [correction]);
    await commit('the correction, with its entry');
    // As CI runs it: the commit that makes the correction is HEAD.
    const corrected = await run();
    expect(corrected.code).toBe(0);
    expect(corrected.out).toMatch(
      /accepted as corrections to the interface \(docs\/interface-corrections\.yaml\):\n {2}- GET \/categories/,
    );

    // Later the field becomes required again (no break), then optional again: the entry,
    // already in the file, does not excuse it.
    write(withNameRequired(true));
    await commit('required again');
    write(withNameRequired(false));
    await commit('optional again');
    const again = await run();
    expect(again.code).toBe(1);
    expect(again.out).toContain("cannot make required response property 'name' optional");
  });
});

describe('npm run spec:breaking -- --base REF', () => {
  let dir: string;
  const git = (...args: string[]) => promisify(execFile)('git', args, { cwd: dir });
  const run = () =>
    runScript(dir, 'spec-breaking.ts', '--base', 'HEAD').then(({ code, stdout, stderr }) => ({ code, out: stdout + stderr }));

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'petstore-breaking-'));
    symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'));
    writeFileSync(join(dir, 'openapi.yaml'), stringify(spec()));
    await git('init', '-q');
    await git('-c', 'user.email=ci@example.com', '-c', 'user.name=ci', 'commit', '-q', '--allow-empty', '-m', 'empty');
    await git('add', 'openapi.yaml');
    await git('-c', 'user.email=ci@example.com', '-c', 'user.name=ci', 'commit', '-q', '-m', 'spec');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('fails on a removed response field, naming it, and passes once the major version is raised', async () => {
    const doc = changed((d) => delete d.components.schemas.Category.properties.description);
    writeFileSync(join(dir, 'openapi.yaml'), stringify(doc));
    const refused = await run();
    expect(refused.code).toBe(1);
    expect(refused.out).toContain("cannot remove response property 'description'");

    doc.info.version = '2.0.0';
    writeFileSync(join(dir, 'openapi.yaml'), stringify(doc));
    const allowed = await run();
    expect(allowed).toEqual({ code: 0, out: expect.stringContaining("info.version's major was raised (1.0.0 -> 2.0.0)") });
  });

  it('passes an unchanged spec', async () => {
    writeFileSync(join(dir, 'openapi.yaml'), stringify(spec()));
    expect(await run()).toEqual({ code: 0, out: expect.stringContaining('keeps every promise of its version at HEAD') });
  });
});
