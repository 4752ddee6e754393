/**
 * The Redis layer of key verification, shared by every gateway replica.
 * Entries are sealed by KeyStateCodec (MAC under the key-cache secret, bound
 * to the hash, with their own expiry): an entry someone else wrote, moved or
 * kept is read as absent. The gateway writes only with SET … EX … NX: a
 * revoker overwrites an entry with its terminal marker, so a lookup that
 * raced a revoke never puts an active entry back over the marker (and if the
 * marker could not be written, the replicas' ended entries outlive the
 * active one; see key-cache.ts).
 */
import type { Redis } from 'ioredis'
import type { KeyState, KeyStateCodec, RedisNames } from '@scoped/shared/key-state'
import { redisNames, redisTtlSeconds } from '@scoped/shared/key-state'

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
    this.commands.set(this.names.cacheEntry(hash), text, 'EX', ttl, 'NX').catch(this.onWriteError)
  }
}
