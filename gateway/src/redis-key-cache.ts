/**
 * The Redis layer of key verification, shared by every gateway replica.
 * Entries are JSON CachedKeyState under redisNames(prefix).cacheEntry(hash).
 * The gateway writes only with SET … EX … NX: the revoker overwrites an entry
 * with its terminal marker before it publishes the invalidation, so a lookup
 * that raced a revoke can never put an active entry back over the marker.
 */
import type { Redis } from 'ioredis'
import type { CachedKeyState } from '@scoped/shared/key-invalidation'
import { redisNames, TERMINAL_MARKER_TTL_SECONDS } from '@scoped/shared/key-invalidation'
import { isScope } from '@scoped/shared/scope'

/** Where key states are shared between replicas; a failing read is reported by rejecting. */
export interface SharedKeyCache {
  read(hash: string): Promise<CachedKeyState | undefined>
  /** Best effort and never awaited by a request: a failed write only costs a later lookup. */
  write(hash: string, state: CachedKeyState): void
}

export const sharedTtlSeconds = Object.freeze({ active: 300, unknown: 60, terminal: TERMINAL_MARKER_TTL_SECONDS })

/** Reads an entry back; anything malformed is treated as absent, never trusted. */
export function parseCachedKeyState(text: string): CachedKeyState | undefined {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return undefined
  }
  if (typeof value !== 'object' || value === null) return undefined
  const { status, tenant } = value as Record<string, unknown>
  if (status === 'revoked' || status === 'deleted' || status === 'unknown') return { status }
  if (status !== 'active' || typeof tenant !== 'object' || tenant === null) return undefined
  const { scope, agencyId, subAccountId, keyId } = tenant as Record<string, unknown>
  if (!isScope(scope) || typeof agencyId !== 'string' || typeof keyId !== 'string') return undefined
  if (scope === 'SUB-ACCOUNT' ? typeof subAccountId !== 'string' : subAccountId !== null) return undefined
  return { status, tenant: { scope, agencyId, subAccountId: subAccountId as string | null, keyId } }
}

export class RedisKeyCache implements SharedKeyCache {
  private readonly names: ReturnType<typeof redisNames>

  constructor(
    private readonly commands: Redis,
    prefix: string,
    private readonly onWriteError: (error: unknown) => void = () => undefined,
  ) {
    this.names = redisNames(prefix)
  }

  async read(hash: string): Promise<CachedKeyState | undefined> {
    const text = await this.commands.get(this.names.cacheEntry(hash))
    return text === null ? undefined : parseCachedKeyState(text)
  }

  write(hash: string, state: CachedKeyState): void {
    const ttl = state.status === 'active' ? sharedTtlSeconds.active : state.status === 'unknown' ? sharedTtlSeconds.unknown : sharedTtlSeconds.terminal
    this.commands.set(this.names.cacheEntry(hash), JSON.stringify(state), 'EX', ttl, 'NX').catch(this.onWriteError)
  }
}
