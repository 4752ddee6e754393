/**
 * The Redis layer of key verification, shared by every gateway replica.
 * Entries are sealed by KeyStateCodec (MAC under the key-cache secret, bound
 * to the hash, with their own expiry): an entry someone else wrote, moved or
 * kept is read as absent. The gateway writes by compare-and-set on the
 * state version (WRITE_SCRIPT): an active state only over nothing or over an
 * active entry of an older version, an ended one over nothing or any
 * versioned active entry, an unknown one only over nothing (as SET NX). A
 * revoker overwrites an entry with its terminal marker, so a lookup that
 * raced a revoke never puts an active entry back over the marker, nor one
 * that raced a change an older version over the newer (and when Redis
 * refuses writes, the replicas' ended entries and pinned versions outlive
 * what was left there; see key-cache.ts). The script reads the version of
 * the entry there without its MAC, which it cannot check: a forged one can
 * only keep the gateways from writing, never make them believe it.
 */
import type { Redis } from 'ioredis'
import type { KeyState, KeyStateCodec, RedisNames } from '@scoped/shared/key-state'
import { redisNames, redisTtlSeconds, stateVersion } from '@scoped/shared/key-state'

/**
 * SET unless what is there outranks it. KEYS[1]: the entry's name; ARGV: the sealed entry, its TTL in
 * seconds, its rank (an active state's version; ENDED_RANK for an ended one; -1 for an unknown one).
 */
const WRITE_SCRIPT = `
local old = redis.call('GET', KEYS[1])
if old then
  local rank = tonumber(ARGV[3])
  if rank < 0 then return 0 end
  local dot = string.find(old, '%.[^%.]*$')
  if not dot then return 0 end
  local ok, entry = pcall(cjson.decode, string.sub(old, 1, dot - 1))
  if not ok or type(entry) ~= 'table' or entry['s'] ~= 'active' or type(entry['v']) ~= 'number' or entry['v'] >= rank then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return 1
`

/** The rank of an ended state: above every version. */
const ENDED_RANK = Number.MAX_SAFE_INTEGER

/** Where key states are shared between replicas; a failing read is reported by rejecting. */
export interface SharedKeyCache {
  /** The entry if present and genuine; `forged` when something is there that fails its check. */
  read(hash: string): Promise<KeyState | 'forged' | undefined>
  /** Best effort and never awaited by a request: a failed write only costs a later lookup. */
  write(hash: string, state: KeyState): void
}

export class RedisKeyCache implements SharedKeyCache {
  private readonly names: RedisNames

  constructor(
    private readonly commands: Redis,
    prefix: string,
    private readonly codec: KeyStateCodec,
    private readonly onWriteError: (error: unknown) => void = () => undefined,
  ) {
    this.names = redisNames(prefix)
  }

  async read(hash: string): Promise<KeyState | 'forged' | undefined> {
    const text = await this.commands.get(this.names.cacheEntry(hash))
    if (text === null) return undefined
    return this.codec.decodeEntry(hash, text, Date.now()) ?? 'forged'
  }

  write(hash: string, state: KeyState): void {
    const ttl = state.status === 'active' ? redisTtlSeconds.active : state.status === 'unknown' ? redisTtlSeconds.unknown : redisTtlSeconds.terminal
    const text = this.codec.encodeEntry(hash, state, Date.now() + ttl * 1000)
    const rank = state.status === 'active' ? stateVersion(state) : state.status === 'unknown' ? -1 : ENDED_RANK
    this.commands.eval(WRITE_SCRIPT, 1, this.names.cacheEntry(hash), text, ttl, rank).catch(this.onWriteError)
  }
}
