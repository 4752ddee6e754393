/**
 * The shared token buckets, in Redis: one atomic script per update, which
 * refills a bucket by the time elapsed (Redis' own clock, so replicas'
 * clocks do not matter), takes back the tokens a replica returns, and grants
 * up to the tokens asked for. A bucket is a hash under
 * `<prefix>rl:<bucket id>` that expires once it would be full again.
 */
import type { Redis } from 'ioredis'

const LEASE_SCRIPT = `
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local giveBack = tonumber(ARGV[4])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 't', 'ts')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = burst
  at = now
end
tokens = math.min(burst, tokens + math.max(0, now - at) / 1000 * rate + giveBack)
local granted = math.min(want, math.floor(tokens))
tokens = tokens - granted
redis.call('HSET', KEYS[1], 't', tostring(tokens), 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate * 1000) + 1000)
return {granted, tostring(tokens)}
`

export interface Lease {
  /** Tokens granted to this replica now. */
  granted: number
  /** Tokens left in the shared bucket after the grant. */
  left: number
}

export class RateLimitStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {
    redis.defineCommand('scopedLease', { numberOfKeys: 1, lua: LEASE_SCRIPT })
  }

  /** Asks for up to `want` tokens of a bucket, returning `giveBack` unused ones first. */
  async lease(bucket: string, rate: number, burst: number, want: number, giveBack = 0): Promise<Lease> {
    const command = (this.redis as unknown as { scopedLease(key: string, ...args: Array<string | number>): Promise<[number, string]> }).scopedLease
    const [granted, left] = await command.call(this.redis, `${this.prefix}rl:${bucket}`, rate, burst, want, giveBack)
    return { granted: Number(granted), left: Number(left) }
  }
}
