// npm run account:create -- --email E --password P [--admin]
// The only way to make an admin. Uses DATABASE_PATH like the service.
import { parseArgs } from 'node:util';
import { createDatabase } from '../db/client';
import { createRepositories } from '../db/repositories';
import { loadConfig } from '../server/config';
import { registerAccount } from '../handlers/accounts';

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
  const db = createDatabase(config.databasePath);
  const role = values.admin ? 'admin' : 'customer';
  const account = await registerAccount(createRepositories(db), { email: values.email, password: values.password, role });
  db.$client.close();
  if (!account) {
    console.error(`An account with the email ${values.email} already exists.`);
    process.exit(1);
  }
  console.log(`Created ${role} account ${account.id} <${account.email}> in ${config.databasePath}`);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
