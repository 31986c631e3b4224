// The committed migrations, applied the way the service applies them.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDatabase, migrateDatabase, openDatabase } from '../db/client';
import { sqliteMigrationsFolder as migrationsFolder } from '../db/files';
import { defaultDatabaseTimeoutMs } from '../domain/storage';

describe('migrations', () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-migrate-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('create every table, with WAL, foreign keys and a busy timeout', () => {
    const db = createDatabase(join(dir, 'a.db'));
    const sqlite = db.$client;
    const tables = (
      sqlite
        .prepare("select name from sqlite_master where type = 'table' and name not like '%sqlite%' and name not like '%drizzle%'")
        .all() as Array<{ name: string }>
    ).map((r) => r.name);
    expect(tables.sort()).toEqual([
      'accounts',
      'api_keys',
      'categories',
      'deprecated_calls',
      'idempotency_keys',
      'inventory',
      'messages',
      'orders',
      'pets',
      'rate_limits',
      'write_checks',
    ]);
    expect(sqlite.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(sqlite.pragma('foreign_keys', { simple: true })).toBe(1);
    expect(sqlite.pragma('busy_timeout', { simple: true })).toBe(defaultDatabaseTimeoutMs);
    sqlite.close();
  });

  it('are idempotent and keep existing rows when applied again', () => {
    const path = join(dir, 'b.db');
    const first = createDatabase(path);
    first.$client.prepare("insert into categories (name, name_key) values ('Dogs', 'dogs')").run();
    first.$client.close();
    const again = openDatabase(path);
    migrateDatabase(again);
    expect(again.$client.prepare('select count(*) as n from categories').get()).toEqual({ n: 1 });
    expect(again.$client.pragma('foreign_keys', { simple: true })).toBe(1);
    again.$client.close();
  });

  /** A copy of the committed migrations with `sql` as one more, in `name` under the test's folder. */
  const withMigration = (name: string, tag: string, sql: string) => {
    const folder = join(dir, name);
    cpSync(migrationsFolder, folder, { recursive: true });
    writeFileSync(join(folder, `${tag}.sql`), sql);
    const journalPath = join(folder, 'meta', '_journal.json');
    const journal = JSON.parse(readFileSync(journalPath, 'utf8'));
    journal.entries.push({ idx: journal.entries.length, version: '6', when: Date.now(), tag, breakpoints: true });
    writeFileSync(journalPath, JSON.stringify(journal));
    return folder;
  };

  it('refuse a migration that leaves a row pointing at nothing', () => {
    const folder = withMigration(
      'dangling',
      '0099_dangling_order',
      "PRAGMA foreign_keys=OFF;\n--> statement-breakpoint\ninsert into orders (account_id, pet_id, quantity, created_at) values (999, 1, 1, '2026-01-01T00:00:00Z');",
    );
    const db = createDatabase(join(dir, 'dangling.db'));
    expect(() => migrateDatabase(db, folder)).toThrow(/Migration left 1 foreign key violations/);
    expect(db.$client.pragma('foreign_keys', { simple: true })).toBe(1);
    db.$client.close();
  });

  it('check the references only when a migration ran: a start with none pending reads no table through', () => {
    const db = createDatabase(join(dir, 'none-pending.db'));
    // A row pointing at nothing that no migration made: the check would find it.
    db.$client.pragma('foreign_keys = OFF');
    db.$client.exec("insert into orders (account_id, pet_id, quantity, created_at) values (999, 1, 1, '2026-01-01T00:00:00Z')");
    db.$client.pragma('foreign_keys = ON');
    expect(() => migrateDatabase(db)).not.toThrow();
    expect(db.$client.prepare('select count(*) as n from orders').get()).toEqual({ n: 1 });
    db.$client.close();
  });

  it('survive a drizzle-kit table rebuild without cascade-deleting child rows', () => {
    // What drizzle-kit writes when it must rebuild a SQLite table: copy, drop, rename.
    // Dropping `pets` with foreign keys on would cascade-delete every inventory row.
    const folder = join(dir, 'migrations');
    cpSync(migrationsFolder, folder, { recursive: true });
    writeFileSync(
      join(folder, '0001_rebuild_pets.sql'),
      [
        'PRAGMA foreign_keys=OFF;',
        "CREATE TABLE `__new_pets` (`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL, `name` text NOT NULL, `category_id` integer NOT NULL, `status` text DEFAULT 'available' NOT NULL, FOREIGN KEY (`category_id`) REFERENCES `categories`(`id`) ON UPDATE no action ON DELETE restrict);",
        'INSERT INTO `__new_pets`("id", "name", "category_id", "status") SELECT "id", "name", "category_id", "status" FROM `pets`;',
        'DROP TABLE `pets`;',
        'ALTER TABLE `__new_pets` RENAME TO `pets`;',
        'PRAGMA foreign_keys=ON;',
      ].join('\n--> statement-breakpoint\n'),
    );
    const journalPath = join(folder, 'meta', '_journal.json');
    const journal = JSON.parse(readFileSync(journalPath, 'utf8'));
    journal.entries.push({ idx: 1, version: '6', when: Date.now(), tag: '0001_rebuild_pets', breakpoints: true });
    writeFileSync(journalPath, JSON.stringify(journal));

    const path = join(dir, 'c.db');
    const db = createDatabase(path);
    db.$client.exec(`
      insert into categories (id, name, name_key) values (1, 'Dogs', 'dogs');
      insert into pets (id, name, category_id) values (1, 'Rex', 1), (2, 'Fido', 1);
      insert into inventory (pet_id, quantity) values (1, 5), (2, 7);
    `);
    migrateDatabase(db, folder);
    expect(db.$client.prepare('select pet_id, quantity from inventory order by pet_id').all()).toEqual([
      { pet_id: 1, quantity: 5 },
      { pet_id: 2, quantity: 7 },
    ]);
    expect(db.$client.pragma('foreign_keys', { simple: true })).toBe(1);
    db.$client.close();
  });

  it('rewrite idempotency records written before the domain layer as outcomes', () => {
    // A database last migrated before 0002: its records hold an HTTP status and body.
    const folder = join(dir, 'before-0002');
    cpSync(migrationsFolder, folder, { recursive: true });
    const journalPath = join(folder, 'meta', '_journal.json');
    const journal = JSON.parse(readFileSync(journalPath, 'utf8'));
    const full = JSON.stringify(journal);
    const at = journal.entries.findIndex((e: { tag: string }) => e.tag === '0002_idempotency_outcome');
    journal.entries = journal.entries.slice(0, at);
    writeFileSync(journalPath, JSON.stringify(journal));

    const db = openDatabase(join(dir, 'd.db'));
    migrateDatabase(db, folder);
    const order = { id: 7, petId: 1, quantity: 2, complete: false };
    db.$client.exec(`
      insert into accounts (id, email, password_hash, role, created_at) values (1, 'old@example.com', 'x', 'customer', '2026-01-01T00:00:00Z');
      insert into idempotency_keys (account_id, key, request_hash, response_status, response_body, created_at) values
        (1, 'placed', 'h1', 201, '${JSON.stringify(order)}', '2026-01-01T00:00:00Z'),
        (1, 'refused', 'h2', 409, '{"code":"insufficient_stock","message":"Only 1 left","status":409}', '2026-01-01T00:00:00Z'),
        (1, 'new', 'h3', 0, '{"ok":true,"value":{"id":8}}', '2026-01-01T00:00:00Z');
    `);
    writeFileSync(journalPath, full);
    migrateDatabase(db, folder);

    const rows = db.$client.prepare('select * from idempotency_keys order by key').all() as Array<Record<string, unknown>>;
    expect(rows.map((r) => [r.key, JSON.parse(r.outcome as string)])).toEqual([
      ['new', { ok: true, value: { id: 8 } }],
      ['placed', { ok: true, value: order }],
      ['refused', { ok: false, error: { code: 'insufficient_stock', message: 'Only 1 left' } }],
    ]);
    expect(Object.keys(rows[0]!).sort()).toEqual(['account_id', 'created_at', 'key', 'outcome', 'request_hash']);
    db.$client.close();
  });
});
