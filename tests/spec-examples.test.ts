// `npm run generate` refuses an example of openapi.yaml that does not fit its schema, as the
// service's validator checks it (scripts/spec-check.ts, server/pipeline/schemas.ts): a
// consumer, the reference at /docs and the mock never see one. tests/system/
// changing-the-contract.test.ts sees the command itself refuse one.
import { checkExamples, exampleProblems } from '../scripts/spec-check';
import { loadSpec, type OpenApiDocument } from '../server/spec';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the cases reach into arbitrary depths of openapi.yaml
type Doc = Record<string, any>;
const changed = (edit: (doc: Doc) => void): OpenApiDocument => {
  const doc = loadSpec();
  edit(doc);
  return doc;
};

describe('the examples of openapi.yaml', () => {
  it('all fit their schemas', () => {
    expect(exampleProblems(loadSpec())).toEqual([]);
    expect(() => checkExamples(loadSpec())).not.toThrow();
  });

  it.each<[string, (doc: Doc) => void, string]>([
    [
      "a response's example",
      (d) => (d.paths['/pets'].get.responses['200'].content['application/json'].example[0].name = ''),
      'listPets (GET /pets) response 200 example: /0/name must NOT have fewer than 1 characters',
    ],
    [
      "a response's named example, in a response many operations share",
      (d) => (d.components.responses.BadRequest.content['application/json'].examples.invalidJson.value.status = 200),
      'response 400 example "invalidJson" (shared by',
    ],
    [
      'a request body example with a field the body refuses',
      (d) => (d.components.requestBodies.NewCategory.content['application/json'].example.id = 3),
      'createCategory (POST /categories) request body example (shared by 2 operations): / must NOT have additional properties (id)',
    ],
    [
      'a date-time the service cannot store (its own format, not only RFC 3339)',
      (d) => (d.components.schemas.Order.example.shipDate = '2026-11-22T23:59:60Z'),
      'components.schemas.Order example: /shipDate must match format "date-time"',
    ],
    [
      "a property's own example",
      (d) => (d.components.schemas.NewCategory.properties.name.example = 'x'.repeat(101)),
      'components.schemas.NewCategory.name example: / must NOT have more than 100 characters',
    ],
  ])('names %s that does not fit', (_, edit, named) => {
    const spec = changed(edit);
    expect(exampleProblems(spec)).toEqual([expect.stringContaining(named)]);
    expect(() => checkExamples(spec)).toThrow(/^Examples in the OpenAPI document that do not fit their schema/);
  });
});
