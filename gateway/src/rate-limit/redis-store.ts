/**
 * The token buckets in Redis, shared by every replica: one atomic script per
 * lease, which refills a bucket by the time elapsed (Redis' own clock, so
 * replicas' clocks do not matter), takes back the tokens a replica returns,
 * and grants up to the tokens asked for. A bucket is a hash under
 * `<prefix>rl:<bucket id>` that expires once it would be full again.
 */
import type { Redis } from 'ioredis'
import type { Lease, LeaseStore } from './lease-store.js'

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

type LeaseCommand = (key: string, ...args: Array<string | number>) => Promise<[number, string]>

export class RedisLeaseStore implements LeaseStore {
  private readonly command: LeaseCommand

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {
    redis.defineCommand('scopedLease', { numberOfKeys: 1, lua: LEASE_SCRIPT })
    this.command = (redis as unknown as { scopedLease: LeaseCommand }).scopedLease
  }

  async lease(bucket: string, rate: number, burst: number, want: number, giveBack = 0): Promise<Lease> {
    const [granted, left] = await this.command.call(this.redis, `${this.prefix}rl:${bucket}`, rate, burst, want, giveBack)
    return { granted: Number(granted), left: Number(left) }
  }
}
