// npm run db:migrate: applies the migrations to DATABASE_URL (db/pg/migrations) or
// DATABASE_PATH (db/migrations), as the service does at start-up; the step to run once
// before a rolling deployment (docs/deployment.md).
import { prepareStorage } from '../db/open';
import { loadConfig } from '../server/config';

async function main(): Promise<void> {
  const config = loadConfig();
  const { storage } = await prepareStorage({ ...config, seedDemoData: false });
  await storage.close();
  console.log(`Migrations applied to ${config.databaseUrl ? 'the PostgreSQL database' : config.databasePath}`);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
