// drizzle-kit for the PostgreSQL dialect: `npm run db:generate:pg` writes db/pg/migrations.
import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'postgresql',
  schema: './db/pg/schema.ts',
  out: './db/pg/migrations',
});
