// npm run deprecations -- [--operation ID] [--days 30]
// Which accounts called a deprecated operation in the last days, how often and when last,
// read from the database the service records them in (server/deprecation/call-log.ts), with
// DATABASE_URL or DATABASE_PATH like the service. Without --operation: every operation
// openapi.yaml marks deprecated. Calls of the last few seconds may not be written yet.
import { parseArgs } from 'node:util';
import { openStorage } from '../db/open';
import { operationTable } from '../generated/operations';
import { loadConfig } from '../server/config';

const usage = 'Usage: npm run deprecations -- [--operation OPERATION_ID] [--days DAYS (1 to 3660, default 30)]';
const dayMs = 86_400_000;

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { operation: { type: 'string' }, days: { type: 'string', default: '30' } } });
  const days = Number(values.days);
  const deprecated = Object.entries(operationTable).flatMap(([id, op]) => ('deprecated' in op ? [id] : []));
  if (!Number.isInteger(days) || days < 1 || days > 3660 || (values.operation !== undefined && !(values.operation in operationTable))) {
    console.error(usage);
    process.exit(2);
  }
  const operations = values.operation === undefined ? deprecated : [values.operation];
  // Today counts as one of the days: --days 30 is today and the 29 days before it.
  const since = new Date(Date.now() - (days - 1) * dayMs).toISOString().slice(0, 10);
  const storage = openStorage(loadConfig());
  try {
    for (const operation of operations) {
      const callers = await storage.deprecatedCallers(operation, since);
      console.log(`${operation}: ${callers.length} account(s) since ${since}${deprecated.includes(operation) ? '' : ' (not deprecated)'}`);
      for (const c of callers) console.log(`  ${c.accountId}\t${c.email}\t${c.calls} call(s)\tlast ${c.lastAt}`);
    }
  } finally {
    await storage.close();
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
