// The key a client address is counted under, by the rate limits, the connection caps and
// the fair share alike: an IPv4 address is its own key, an IPv6 address counts by its /56,
// since one IPv6 client holds a whole prefix (express-rate-limit's ipKeyGenerator; an IPv4
// address written in IPv6 by a dual-stack listener is its IPv4 address). Only text with a
// colon can be IPv6: any other skips Node's IPv6 check, whose first call compiles a large
// regular expression, on the first connection's path otherwise.
import { ipKeyGenerator } from 'express-rate-limit';

export const addressKey = (address: string): string => (address.includes(':') ? ipKeyGenerator(address) : address);
