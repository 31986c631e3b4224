// server/address-key.ts: the key a client address is counted under is express-rate-limit's,
// with Node's IPv6 check left out for text that cannot be IPv6.
import { ipKeyGenerator } from 'express-rate-limit';
import { addressKey } from '../server/address-key';

it('is an IPv4 address itself, an IPv6 address its /56, an IPv4 address in IPv6 its IPv4', () => {
  expect(addressKey('203.0.113.7')).toBe('203.0.113.7');
  expect(addressKey('2001:db8:1:2:3::9')).toBe('2001:db8:1::/56');
  expect(addressKey('::ffff:127.0.0.1')).toBe('127.0.0.1');
  expect(addressKey('::1')).toBe('::/56');
});

it('gives what ipKeyGenerator gives, whatever the text', () => {
  for (const address of [
    '127.0.0.1',
    '10.0.0.1',
    '::',
    '::1',
    '::ffff:10.1.2.3',
    'fe80::1',
    '2001:db8::1',
    'unknown',
    '',
    'a:b',
    '1.2.3',
  ]) {
    expect(addressKey(address)).toBe(ipKeyGenerator(address));
  }
});
