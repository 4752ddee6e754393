/**
 * What the fast tests of the gate and of the forwarder (gate.test.ts,
 * forwarder.test.ts) put in place of the key layer: a verifier that keeps the
 * gateway's own Verifier interface over two maps the test fills (what the
 * in-process cache holds, what the stores would answer), and keys to present.
 * Nothing here stands in for Postgres or Redis: those are the key layer's
 * business, tested against the real servers (key-verifier.test.ts).
 */
import { generateKey, hashKey } from '@scoped/shared/keys'
import type { ActiveKeyState, EndedKeyState, KeyState, RevokedKeyState } from '@scoped/shared/key-state'
import type { Tenant } from '@scoped/shared/tenant-signature'
import type { Verification, Verifier } from '@scoped/gateway/key-verifier'

export class FakeVerifier implements Verifier {
  generation = 0
  /** By hash: what the in-process cache holds (the synchronous path). */
  readonly memory = new Map<string, KeyState>()
  /** By hash: what a lookup past the cache answers; a key in neither is unknown. */
  readonly stores = new Map<string, Verification>()
  /** Every lookup past the cache, by hash. */
  readonly lookups: string[] = []
  /** Set: a lookup fails (rejects), as a broken verifier would. */
  failing = false
  /** Cleared: the replica is not current with the invalidation log (paused, cut off from Postgres). */
  current = true

  isCurrent(): boolean {
    return this.current
  }

  cached(hash: string): KeyState | undefined {
    return this.memory.get(hash)
  }

  async verify(hash: string): Promise<Verification> {
    this.lookups.push(hash)
    if (this.failing) throw new Error('the verifier failed')
    return this.stores.get(hash) ?? { status: 'unknown' }
  }

  /** What the stores say of a revoked key held without its owner: an ended state there, else what is held (as the real one). */
  async ownerOf(hash: string, held: RevokedKeyState): Promise<EndedKeyState> {
    this.lookups.push(hash)
    if (this.failing) throw new Error('the verifier failed')
    const stored = this.stores.get(hash)
    return stored?.status === 'revoked' || stored?.status === 'deleted' ? stored : held
  }
}

export const subAccountTenant: Tenant = Object.freeze({ scope: 'SUB-ACCOUNT', agencyId: 'agency-1', subAccountId: 'sub-1', keyId: 'key-sub' })
export const agencyTenant: Tenant = Object.freeze({ scope: 'AGENCY', agencyId: 'agency-1', subAccountId: null, keyId: 'key-agency' })

export interface PresentedKey {
  key: string
  hash: string
  /** The header that presents it. */
  headers: Record<string, string>
}

/** A new key (a valid checksum) and its hash. */
export function newKey(): PresentedKey {
  const key = generateKey()
  return { key, hash: hashKey(key), headers: { authorization: `Bearer ${key}` } }
}

/** An active state for `tenant`, with `extra` limits (expiry, allowlist, own rate limit). */
export function active(tenant: Tenant, extra: Omit<ActiveKeyState, 'status' | 'tenant'> = {}): ActiveKeyState {
  return { status: 'active', tenant, ...extra }
}
