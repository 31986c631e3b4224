// npm run db:migrate: applies db/migrations to DATABASE_PATH (the service also does this at start-up).
import { createDatabase } from '../db/client';
import { loadConfig } from '../server/config';

const config = loadConfig();
createDatabase(config.databasePath).$client.close();
console.log(`Migrations applied to ${config.databasePath}`);
