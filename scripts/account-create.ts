// npm run account:create -- --email E --password P [--admin]
// The only way to make an admin. Uses DATABASE_URL or DATABASE_PATH like the service.
import { parseArgs } from 'node:util';
import { prepareStorage } from '../db/open';
import { createStore } from '../domain/store';
import { loadConfig } from '../server/config';
import { registerAccount } from '../server/security';

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      email: { type: 'string' },
      password: { type: 'string' },
      admin: { type: 'boolean', default: false },
    },
  });
  if (!values.email || !values.password || values.password.length < 8) {
    console.error('Usage: npm run account:create -- --email EMAIL --password PASSWORD (8+ characters) [--admin]');
    process.exit(2);
  }
  const config = loadConfig();
  // Migrates like the service, but never loads the demo catalogue.
  const { storage } = await prepareStorage({ ...config, seedDemoData: false });
  const role = values.admin ? 'admin' : 'customer';
  const account = await registerAccount(createStore(storage), { email: values.email, password: values.password, role });
  await storage.close();
  if (!account) {
    console.error(`An account with the email ${values.email} already exists.`);
    process.exit(1);
  }
  console.log(`Created ${role} account ${account.id} <${account.email}> in ${config.databaseUrl ? 'the PostgreSQL database' : config.databasePath}`);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
