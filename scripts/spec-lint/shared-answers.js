// Spectral function (.spectral.yaml, rule petstore-shared-answers): an operation declares
// the answers every operation of this service can give, whatever it does (openapi.yaml,
// "Order of checks": what the HTTP parser refuses, bad input, a bug, an unavailable
// database), and each of its answers the headers the service puts on every response, and
// on an authenticated one Cache-Control. A new operation written without them would
// promise clients less than the service sends, and nothing else would notice.
// Options: `statuses`, `headers` (on every response), `authenticatedHeaders` (on every
// response of an operation that takes credentials, but the `beforeAuthentication` ones,
// which the HTTP parser gives before any credentials are read).
export default (operation, options, context) => {
  if (!operation || typeof operation !== 'object') return [];
  const results = [];
  const responses = operation.responses ?? {};
  const missing = options.statuses.filter((status) => !(status in responses));
  if (missing.length > 0) {
    results.push({
      message: `declares no ${missing.join(', ')}: every operation answers ${options.statuses.join(', ')} (use the shared components/responses)`,
      path: [...context.path, 'responses'],
    });
  }
  const security = operation.security ?? context.document.data.security ?? [];
  const authenticated = security.some((requirement) => Object.keys(requirement).length > 0);
  for (const [status, response] of Object.entries(responses)) {
    const declared = Object.keys(response?.headers ?? {}).map((name) => name.toLowerCase());
    const absent = (names) => names.filter((name) => !declared.includes(name.toLowerCase()));
    const everywhere = absent(options.headers);
    const afterAuthentication = authenticated && !options.beforeAuthentication.includes(status) ? absent(options.authenticatedHeaders) : [];
    for (const [names, which] of [
      [everywhere, 'every response'],
      [afterAuthentication, 'every authenticated response'],
    ]) {
      if (names.length === 0) continue;
      results.push({
        message: `its ${status} answer declares no ${names.join(', ')}: the service sends ${names.length === 1 ? 'it' : 'them'} on ${which} (use components/headers)`,
        path: [...context.path, 'responses', status],
      });
    }
  }
  return results;
};
