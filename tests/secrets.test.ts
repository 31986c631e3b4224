// Keys are stored only as SHA-256, passwords only as argon2id: nothing in clear on disk.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { customer, keyFor, password, setupApp } from './helpers';

describe('the database file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-secrets-'));
  const t = setupApp({ databasePath: join(dir, 'petstore.db') });
  afterAll(async () => {
    await t.storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('holds no API key and no password in clear, in the main file or the WAL', async () => {
    const me = await customer(t.app);
    const second = await keyFor(t.app, me.email);
    expect((await request(t.app).get('/api-keys').set(me.auth)).status).toBe(200);

    const bytes = readdirSync(dir)
      .map((f) => readFileSync(join(dir, f)))
      .reduce((all, b) => Buffer.concat([all, b]), Buffer.alloc(0));
    expect(bytes.length).toBeGreaterThan(0);
    // The email is stored, which proves the search reads real rows.
    expect(bytes.includes(Buffer.from(me.email))).toBe(true);
    for (const secret of [me.key, second, me.key.slice(8), password]) {
      expect(bytes.includes(Buffer.from(secret))).toBe(false);
    }
    const [row] = (await t.query('select password_hash from accounts where email = ?', me.email)) as Array<{ password_hash: string }>;
    expect(row?.password_hash).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
  });
});
