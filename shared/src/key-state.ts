/**
 * The key-state protocol, in one place: what a gateway knows about a key (by
 * its hash), how that state is kept in Redis, and the messages by which a
 * revoker tells every gateway replica to drop a key, with their
 * acknowledgements.
 *
 * Redis is a cache that someone else might write to, so nothing read from it
 * is trusted for its shape alone: every entry, message and acknowledgement
 * carries an HMAC-SHA256 under the key-cache secret (KEY_CACHE_SECRET, or
 * derived from TENANT_SIGNING_SECRET; see secrets.ts), which Redis never sees.
 * An entry is bound to the hash it is stored under and carries its own
 * expiry, so neither moving it to another key nor replaying an old one later
 * makes it say more than it said when it was written. Anything that fails the
 * check is read as absent.
 *
 * Postgres is the source of truth, and also the record of invalidations
 * (table key_invalidations, written by trigger in the same transaction as the
 * revoke or delete): see key-store.ts for the backstop that every replica
 * follows whatever Redis is doing.
 */
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto'
import type { RateLimit } from './rate-limit.js'
import { isBurst, isRate } from './rate-limit.js'
import type { Tenant } from './tenant-signature.js'
import { isScope } from './scope.js'
import { MAX_KEY_PERMISSIONS, parsePermission } from './permissions.js'

/**
 * A key that authenticates, with what limits it beyond its scope. The expiry
 * and the allowlist are checked by the gateway on every request, against the
 * clock and the client address, never left to a cache's lifetime; the rate
 * limit sizes the key's own buckets. Absent means no limit (or the route's
 * default), so a state without them reads as it did before they existed.
 */
export interface ActiveKeyState {
  status: 'active'
  tenant: Tenant
  /** Epoch milliseconds from which the key is refused (an expiry, or the end of a roll's grace period); absent or null: never. */
  expiresAt?: number | null
  /** CIDR blocks (ip-address.ts spelling) the key may be used from; absent or empty: any address. */
  allowedCidrs?: readonly string[]
  /** The key's own rate limit, replacing the route's `key` limit on every route of its scope; absent: the routes file's. */
  rateLimit?: RateLimit
  /**
   * The key's state version (api_keys.state_version): one more with every change of what is cached about
   * it. A replica refuses a state older than the newest version it has heard of. Absent: 0, older than any.
   */
  version?: number
  /**
   * The key's permissions (permissions.ts), sorted, each once; absent: unrestricted (every permission of its
   * scope). An empty list is a key restricted to the routes that name no permission.
   */
  permissions?: readonly string[]
}

/**
 * A revoked key: refused, whatever else is known. `tenant`, when known, is the key's owner (a key's tenant
 * never changes), so its refusals are counted in its usage; it comes from Postgres, from a sealed entry
 * that carries it, or from the key's own active state, never from an unsealed source.
 */
export interface RevokedKeyState {
  status: 'revoked'
  tenant?: Tenant
}

/**
 * What is known about a key, by its hash. A deleted key carries no owner: it no longer exists for its
 * tenant, so its requests are refused like an unknown key's and counted for no one.
 */
export type KeyState = ActiveKeyState | RevokedKeyState | { status: 'deleted' } | { status: 'unknown' }

/** The state of a key that ended. */
export type EndedKeyState = RevokedKeyState | { status: 'deleted' }

/** The most CIDR blocks an entry may carry (the database allows 32). */
const MAX_ENTRY_CIDRS = 64

/** States a key never leaves: served from any cache without further trust. */
export type TerminalStatus = 'revoked' | 'deleted'

/**
 * What an invalidation says happened to a key: it ended, its record changed,
 * or it was created (every replica adds it to its issued-key filter).
 */
export type InvalidatedState = TerminalStatus | 'changed' | 'created'

export interface KeyInvalidation {
  hash: string
  state: InvalidatedState
  /** For `changed`: the state version the change made; every state older than it is refused from then on. */
  version?: number
  /**
   * For `revoked`: the key's owner, so its later requests are counted in its usage without a lookup. Set by the
   * revoker (its sealed marker carries it) and by the log (Postgres); messages never carry it.
   */
  tenant?: Tenant
}

/** The version of a state: its own, or 0 (older than any change) for a state written without one. */
export function stateVersion(state: ActiveKeyState): number {
  return state.version ?? 0
}

function isVersion(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
}

export function isTerminal(status: string): status is TerminalStatus {
  return status === 'revoked' || status === 'deleted'
}

/** How long each kind of entry lives in Redis. */
export const redisTtlSeconds = Object.freeze({
  active: 300,
  unknown: 60,
  /** Terminal markers outlive any in-flight lookup by far; after they expire Postgres still answers the same. */
  terminal: 24 * 60 * 60,
})

/** Names of every Redis key and channel, under one prefix per deployment (or test run). */
export function redisNames(prefix: string) {
  return {
    cacheEntry: (hash: string) => `${prefix}key:${hash}`,
    channel: `${prefix}key-invalidation`,
    acknowledgements: (invalidationId: string) => `${prefix}key-invalidation-ack:${invalidationId}`,
  }
}
export type RedisNames = ReturnType<typeof redisNames>

const HASH_PATTERN = /^[0-9a-f]{64}$/

/**
 * MACs under the key-cache secret. Each kind of text has its own context
 * line, so an entry can never pass as a message or an acknowledgement.
 */
export class KeyStateCodec {
  constructor(private readonly secret: Buffer) {
    if (secret.length < 32) throw new Error('key-cache secret must be at least 32 bytes')
  }

  private mac(context: string, text: string): string {
    return createHmac('sha256', this.secret).update(context).update('\n').update(text).digest('base64url')
  }

  private sealed(context: string, payload: string): string {
    return `${payload}.${this.mac(context, payload)}`
  }

  /** The payload of `sealed` text when its MAC is right; undefined otherwise. */
  private opened(context: string, text: string): string | undefined {
    const dot = text.lastIndexOf('.')
    if (dot <= 0) return undefined
    const payload = text.slice(0, dot)
    const presented = Buffer.from(text.slice(dot + 1), 'base64url')
    const expected = Buffer.from(this.mac(context, payload), 'base64url')
    return presented.length === expected.length && timingSafeEqual(presented, expected) ? payload : undefined
  }

  /**
   * A Redis cache entry for `hash`, valid until `expiresAtMs` (wall clock).
   * `t`, the key's tenant, for an active key and for a revoked one whose owner is known (sealed with the
   * rest, so nobody without the secret can make a gateway count a request for another key's tenant).
   * An active key's limits go along when it has them: `x`, the key's own
   * expiry (epoch ms), `c`, its allowlist, and `r`, its rate limit as
   * [rate, burst], `v`, its state version, and `p`, its permissions (present exactly when the key is
   * restricted, so an empty list stays restricted). An entry without them (among them every entry written
   * before they existed) reads as a key without them.
   */
  encodeEntry(hash: string, state: KeyState, expiresAtMs: number): string {
    const owner = state.status === 'active' || state.status === 'revoked' ? state.tenant : undefined
    const tenant = owner === undefined ? undefined : [owner.scope, owner.agencyId, owner.subAccountId, owner.keyId]
    const payload: Record<string, unknown> = { s: state.status, t: tenant, e: Math.floor(expiresAtMs) }
    if (state.status === 'active') {
      if (state.expiresAt !== undefined && state.expiresAt !== null) payload['x'] = state.expiresAt
      if (state.allowedCidrs !== undefined && state.allowedCidrs.length > 0) payload['c'] = state.allowedCidrs
      if (state.rateLimit !== undefined) payload['r'] = [state.rateLimit.rate, state.rateLimit.burst]
      if (state.version !== undefined) payload['v'] = state.version
      if (state.permissions !== undefined) payload['p'] = state.permissions
    }
    return this.sealed(`key-state v1 ${hash}`, JSON.stringify(payload))
  }

  /** An entry read back: undefined when forged, moved from another hash, malformed or past its own expiry. */
  decodeEntry(hash: string, text: string, nowMs: number): KeyState | undefined {
    const payload = this.opened(`key-state v1 ${hash}`, text)
    if (payload === undefined) return undefined
    const value = parseObject(payload)
    if (value === undefined || typeof value['e'] !== 'number' || value['e'] <= nowMs) return undefined
    const status = value['s']
    if (status === 'deleted' || status === 'unknown') return { status }
    if (status === 'revoked') {
      if (value['t'] === undefined) return { status }
      const owner = parseTenant(value['t'])
      return owner === undefined ? undefined : { status, tenant: owner }
    }
    if (status !== 'active') return undefined
    const tenant = parseTenant(value['t'])
    if (tenant === undefined) return undefined
    const state: ActiveKeyState = { status, tenant }
    const keyExpiry = value['x']
    if (keyExpiry !== undefined) {
      if (typeof keyExpiry !== 'number' || !Number.isFinite(keyExpiry)) return undefined
      state.expiresAt = keyExpiry
    }
    const cidrs = value['c']
    if (cidrs !== undefined) {
      if (!Array.isArray(cidrs) || cidrs.length === 0 || cidrs.length > MAX_ENTRY_CIDRS) return undefined
      if (!cidrs.every((cidr: unknown) => typeof cidr === 'string' && cidr.length > 0 && cidr.length <= 64)) return undefined
      state.allowedCidrs = cidrs as string[]
    }
    const rateLimit = value['r']
    if (rateLimit !== undefined) {
      if (!Array.isArray(rateLimit) || rateLimit.length !== 2) return undefined
      const [rate, burst] = rateLimit as unknown[]
      if (!isRate(rate) || !isBurst(burst)) return undefined
      state.rateLimit = { rate, burst }
    }
    const version = value['v']
    if (version !== undefined) {
      if (!isVersion(version)) return undefined
      state.version = version
    }
    const permissions = value['p']
    if (permissions !== undefined) {
      if (!Array.isArray(permissions) || permissions.length > MAX_KEY_PERMISSIONS) return undefined
      if (!permissions.every((permission: unknown) => parsePermission(permission) !== undefined)) return undefined
      state.permissions = permissions as string[]
    }
    return state
  }

  encodeMessage(message: InvalidationMessage): string {
    const keys = message.keys.map((key) => (key.version === undefined ? [key.hash, key.state] : [key.hash, key.state, key.version]))
    return this.sealed('invalidation v1', JSON.stringify({ id: message.id, k: keys }))
  }

  decodeMessage(text: string): InvalidationMessage | undefined {
    const payload = this.opened('invalidation v1', text)
    if (payload === undefined) return undefined
    const value = parseObject(payload)
    if (value === undefined || typeof value['id'] !== 'string' || !Array.isArray(value['k'])) return undefined
    const keys: KeyInvalidation[] = []
    for (const entry of value['k'] as unknown[]) {
      if (!Array.isArray(entry) || entry.length > 3) return undefined
      const [hash, state, version] = entry as unknown[]
      if (typeof hash !== 'string' || !HASH_PATTERN.test(hash) || (state !== 'revoked' && state !== 'deleted' && state !== 'changed' && state !== 'created'))
        return undefined
      if (version !== undefined && !isVersion(version)) return undefined
      keys.push(version === undefined ? { hash, state } : { hash, state, version })
    }
    return { id: value['id'], keys }
  }

  /** A replica's acknowledgement of one message: its id, bound to the message. */
  encodeAck(invalidationId: string, replicaId: string): string {
    return this.sealed(`ack v1 ${invalidationId}`, replicaId)
  }

  /** The acknowledging replica's id, or undefined when the acknowledgement is forged or for another message. */
  decodeAck(invalidationId: string, text: string): string | undefined {
    return this.opened(`ack v1 ${invalidationId}`, text)
  }
}

/** An entry's `t`: [scope, agency id, sub-account id (null for an agency key), key id]. */
function parseTenant(value: unknown): Tenant | undefined {
  if (!Array.isArray(value)) return undefined
  const [scope, agencyId, subAccountId, keyId] = value as unknown[]
  if (!isScope(scope) || typeof agencyId !== 'string' || typeof keyId !== 'string') return undefined
  if (scope === 'SUB-ACCOUNT' ? typeof subAccountId !== 'string' : subAccountId !== null) return undefined
  return { scope, agencyId, subAccountId: subAccountId as string | null, keyId }
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}

export interface InvalidationMessage {
  id: string
  keys: KeyInvalidation[]
}

export function newInvalidationMessage(keys: readonly KeyInvalidation[]): InvalidationMessage {
  return { id: randomUUID(), keys: [...keys] }
}

/** How long acknowledgement lists live in Redis, in case a revoker dies before deleting one. */
export const ACK_LIST_TTL_SECONDS = 60
