/**
 * A key's own limits, beyond its scope: its expiry (a chosen one, or the end
 * of a roll's grace period) and its client-address allowlist. Checked on
 * every request, against the wall clock and the client address the gateway
 * derived (client-address.ts), whichever cache the key's state came from: an
 * expiry takes effect at its instant on every replica, never when a cache
 * entry happens to end.
 *
 * An allowlist is parsed once per cached state (compiled to masked words by
 * cidrMatcher and remembered beside the state's list), not per request; a
 * check is then a few integer comparisons.
 */
import { cidrMatcher } from '@scoped/shared/ip-address'
import type { ActiveKeyState } from '@scoped/shared/key-state'
import { permissionsHeader } from '@scoped/shared/permissions'
import type { Tenant } from '@scoped/shared/tenant-signature'

export type KeyPolicyRefusal = 'expired' | 'not-allowed-address'

/** Matchers by allowlist: the cached state's own array, so one parse serves every request that state answers. */
const matchers = new WeakMap<readonly string[], (address: string) => boolean>()

function matcherOf(cidrs: readonly string[]): (address: string) => boolean {
  let matcher = matchers.get(cidrs)
  if (matcher === undefined) {
    matcher = cidrMatcher(cidrs)
    matchers.set(cidrs, matcher)
  }
  return matcher
}

/** Whether the key has expired at `nowMs` (epoch milliseconds): from its instant on. */
export function isExpired(expiresAt: number | null | undefined, nowMs: number): boolean {
  return expiresAt !== undefined && expiresAt !== null && nowMs >= expiresAt
}

/** Why an active key may not be used now from `client` (a normalized address), or undefined when it may. */
export function keyPolicyRefusal(state: ActiveKeyState, nowMs: number, client: string): KeyPolicyRefusal | undefined {
  if (isExpired(state.expiresAt, nowMs)) return 'expired'
  const cidrs = state.allowedCidrs
  if (cidrs !== undefined && cidrs.length > 0 && !matcherOf(cidrs)(client)) return 'not-allowed-address'
  return undefined
}

/** Tenants as signed, by the cached state they came from: one object per state, not per request. */
const signedTenants = new WeakMap<ActiveKeyState, Tenant>()

/** The tenant the backends are told of, with the key's permissions (`x-tenant-key-permissions`, signed). */
export function signedTenant(state: ActiveKeyState): Tenant {
  let tenant = signedTenants.get(state)
  if (tenant === undefined) {
    tenant = { ...state.tenant, permissions: permissionsHeader(state.permissions) }
    signedTenants.set(state, tenant)
  }
  return tenant
}
