import { loadConfig } from '../server/config';

describe('configuration', () => {
  it('has working defaults', () => {
    expect(loadConfig({})).toMatchObject({ port: 3000, databasePath: './data/petstore.db', rateLimitPerMinute: 600 });
  });

  it('fails fast naming each bad variable', () => {
    expect(() => loadConfig({ PORT: 'eighty', RATE_LIMIT_PER_MINUTE: '0' })).toThrow(/PORT[\s\S]*RATE_LIMIT_PER_MINUTE/);
  });
});
