// npm run account:create -- --email E [--password P] [--admin] [--exists-ok]
// The only way to make an admin. Uses DATABASE_URL or DATABASE_PATH like the service. Without
// --password the password is read from a prompt that does not echo it (on a terminal)
// or from the first line of stdin (piped), so it need not appear in the shell history
// or the process list. --exists-ok makes a script that runs it again succeed: an account
// already there with that email and role is left as it is (its password is not changed).
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { prepareStorage } from '../db/open';
import { createStore } from '../domain/store';
import { loadConfig } from '../server/config';
import { describeErrors, schemaChecks } from '../server/pipeline/schemas';
import { dereferenced, loadSpec } from '../server/spec';
import { registerAccount } from '../handlers/accounts';
import { createPasswordHashing } from '../server/security/passwords';

const usage =
  'Usage: npm run account:create -- --email EMAIL [--password PASSWORD] [--admin] [--exists-ok]\n' +
  'The password (8+ characters) is asked for, or read from stdin, when --password is not given.\n' +
  '--exists-ok: an account with this email and role already there is success, left unchanged.';

/** A prompt that echoes nothing of what is typed. */
function promptHidden(question: string): Promise<string> {
  return new Promise((resolve) => {
    const stdin = process.stdin;
    process.stderr.write(question);
    stdin.setRawMode(true);
    stdin.resume();
    let answer = '';
    const onData = (chunk: Buffer) => {
      for (const char of chunk.toString('utf8')) {
        if (char === '\r' || char === '\n' || char === '\u0004') {
          stdin.setRawMode(false);
          stdin.pause();
          stdin.off('data', onData);
          process.stderr.write('\n');
          resolve(answer);
          return;
        }
        if (char === '\u0003') process.exit(130);
        answer = char === '\u007f' ? answer.slice(0, -1) : answer + char;
      }
    };
    stdin.on('data', onData);
  });
}

async function firstLineOfStdin(): Promise<string> {
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    lines.close();
    return line;
  }
  return '';
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      email: { type: 'string' },
      password: { type: 'string' },
      admin: { type: 'boolean', default: false },
      'exists-ok': { type: 'boolean', default: false },
    },
  });
  if (!values.email) {
    console.error(usage);
    process.exit(2);
  }
  if (values.password !== undefined) {
    console.error('account:create: --password puts the password in the process list and the shell history; pipe it on stdin instead');
  }
  const password = values.password ?? (process.stdin.isTTY ? await promptHidden('Password: ') : await firstLineOfStdin());
  // The rule sign-up applies (openapi.yaml, NewAccount): an address RFC 5321 can deliver to, a password of 8 to 200 characters.
  const spec = dereferenced(loadSpec());
  const newAccount = (spec.components as { schemas: Record<string, object> }).schemas.NewAccount!;
  const check = schemaChecks(spec).request(newAccount);
  if (!check({ email: values.email, password })) {
    console.error(`Not an account sign-up would accept (openapi.yaml, NewAccount): ${describeErrors(check)}\n${usage}`);
    process.exit(2);
  }
  const config = loadConfig();
  // Migrates like the service, but never loads the demo catalogue.
  const { storage } = await prepareStorage({ ...config, seedDemoData: false });
  const role = values.admin ? 'admin' : 'customer';
  const passwords = createPasswordHashing(config.passwordHashing);
  const store = createStore(storage);
  const account = await registerAccount({ repos: store, passwords }, { email: values.email, password, role });
  const existing = account ? null : await store.accounts.findByEmail(values.email);
  await storage.close();
  if (!account) {
    if (values['exists-ok'] && existing?.role === role) {
      console.log(`The ${role} account ${existing.id} <${existing.email}> is already there; left unchanged (its password too).`);
      return;
    }
    const already = existing ? ` (${existing.role})` : '';
    console.error(`An account with the email ${values.email} already exists${already}.`);
    process.exit(1);
  }
  console.log(
    `Created ${role} account ${account.id} <${account.email}> in ${config.databaseUrl ? 'the PostgreSQL database' : config.databasePath}`,
  );
}

main().catch((error: unknown) => {
  // The message, and what caused it (a 503's cause is the driver's own error: a timeout, a refused connection).
  const cause = error instanceof Error && error.cause instanceof Error ? ` (${error.cause.message})` : '';
  console.error(error instanceof Error ? `${error.message}${cause}` : error);
  process.exit(1);
});
