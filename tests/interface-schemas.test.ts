// The schemas of the interface we were given keep its fields, types and `required` lists,
// responses included (docs/decisions.md, "Resources and bounds"): what the service always
// sends beyond them is said in descriptions, never by widening `required`. Bounds and
// formats within a type (`int32` under a maximum of 1000) are ours to add.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { repoRoot } from '../scripts/server-process';

type Schema = {
  $ref?: string;
  allOf?: Schema[];
  type?: string;
  format?: string;
  required?: string[];
  properties?: Record<string, Schema>;
  items?: Schema;
};
const schemas = (parse(readFileSync(join(repoRoot, 'openapi.yaml'), 'utf8')) as { components: { schemas: Record<string, Schema> } })
  .components.schemas;

/** A field's type as the interface writes it: `int64`, `integer`, `string`, `date-time`, `boolean` or `PetStatus`. */
function typeOf(s: Schema): string {
  const ref = s.$ref ?? s.allOf?.[0]?.$ref;
  if (ref === '#/components/schemas/PetStatus') return 'PetStatus';
  if (ref) return typeOf(schemas[ref.slice(ref.lastIndexOf('/') + 1)] ?? {});
  if (s.format === 'int64' || s.format === 'date-time') return s.format;
  return s.type ?? '?';
}

describe("openapi.yaml's schemas of the interface", () => {
  const objects: Array<[string, Record<string, string>, string[]]> = [
    ['NewPet', { name: 'string', categoryId: 'int64', status: 'PetStatus' }, ['name', 'categoryId']],
    ['Pet', { id: 'int64', name: 'string', categoryId: 'int64', status: 'PetStatus' }, ['id', 'name', 'categoryId']],
    ['NewCategory', { name: 'string', description: 'string' }, ['name']],
    ['Category', { id: 'int64', name: 'string', description: 'string' }, ['id', 'name']],
    ['Order', { id: 'int64', petId: 'int64', quantity: 'integer', shipDate: 'date-time', complete: 'boolean' }, []],
    ['InventoryItem', { petId: 'int64', quantity: 'integer', status: 'PetStatus' }, ['petId', 'quantity', 'status']],
    ['InventoryUpdate', { quantity: 'integer' }, ['quantity']],
    ['Error', { code: 'string', message: 'string', status: 'integer' }, ['code', 'message', 'status']],
  ];

  it.each(objects)('%s has the fields %j and requires exactly %j', (name, fields, required) => {
    const schema = schemas[name] ?? {};
    const types = Object.fromEntries(Object.entries(schema.properties ?? {}).map(([field, s]) => [field, typeOf(s)]));
    expect(types).toEqual(fields);
    expect([...(schema.required ?? [])].sort()).toEqual([...required].sort());
  });

  it('PetStatus is available, pending or sold; Pets is an array of Pet', () => {
    expect(schemas.PetStatus).toMatchObject({ type: 'string', enum: ['available', 'pending', 'sold'] });
    expect(schemas.Pets).toMatchObject({ type: 'array', items: { $ref: '#/components/schemas/Pet' } });
  });
});
