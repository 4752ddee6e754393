/**
 * Whether this replica is ready for traffic, and if not, why: what /readyz
 * answers (operations.ts) and gateway_ready counts. Ready means it can do
 * its job for any key, not only for those it holds in memory: Postgres
 * answers, the key lookup itself works (run for a hash no key has, and no
 * lookup of a real key failed lately), it is current with the invalidation
 * log, it holds the filter of issued keys, it has routes, and it is not shutting down. Redis only speeds things
 * up, so it is not a condition.
 */
import { withDeadline } from '@scoped/shared/deadline'
import type { Pool } from '@scoped/shared/db'
import type { GatewayConfig } from './config.js'
import type { KeyLayer } from './key-layer.js'

/** One check: ready, or the reason it is not, a sentence for the operator. */
export type CheckResult = { ready: true } | { ready: false; reason: string }

/** Every check by name. */
export type ReadinessCheck = () => Promise<Record<string, CheckResult>>

/** A dependency slower than this is not ready (the probe itself has a deadline of its own, a few seconds). */
const CHECK_TIMEOUT_MS = 1_000
/** A lookup of a real key that failed this recently keeps the replica out of the load balancer. */
export const LOOKUP_FAILURE_WINDOW_MS = 10_000
/** A hash no key has (the key format's hashes are SHA-256 of a random secret). */
const PROBE_HASH = '0'.repeat(64)

const READY: CheckResult = Object.freeze({ ready: true })

function notReady(reason: string): CheckResult {
  return { ready: false, reason }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

async function postgres(pool: Pool): Promise<CheckResult> {
  try {
    await withDeadline(pool.query('SELECT 1'), CHECK_TIMEOUT_MS, 'the Postgres check')
    return READY
  } catch (error) {
    return notReady(`Postgres does not answer: ${messageOf(error)}`)
  }
}

/** The lookup a key not in memory goes through, and the failures of real lookups in the last window. */
async function keyLookup(keys: KeyLayer, now: number): Promise<CheckResult> {
  try {
    await withDeadline(keys.store.lookup(PROBE_HASH), CHECK_TIMEOUT_MS, 'the key lookup check')
  } catch (error) {
    return notReady(`keys not held in memory cannot be verified: the key lookup fails (${messageOf(error)})`)
  }
  const failure = keys.verifier.lastStoreFailure
  if (failure !== undefined && now - failure.at < LOOKUP_FAILURE_WINDOW_MS) {
    return notReady(`keys not held in memory cannot all be verified: a key lookup failed ${Math.round((now - failure.at) / 1000)} s ago (${failure.message})`)
  }
  return READY
}

export function readinessChecks(config: GatewayConfig, pool: Pool, keys: KeyLayer, isDraining: () => boolean): ReadinessCheck {
  return async () => {
    const [postgresResult, keyLookupResult] = await Promise.all([postgres(pool), keyLookup(keys, performance.now())])
    return {
      postgres: postgresResult,
      keyLookup: keyLookupResult,
      invalidationLog: keys.follower.current ? READY : notReady('not current with the invalidation log: cached keys are not believed'),
      // Every issued key's hash is in memory: until then keys outside it cost a lookup each.
      issuedKeys: keys.issued.loaded ? READY : notReady('the filter of issued keys is not loaded yet'),
      routes: config.routes.routes.length > 0 ? READY : notReady('the route map has no routes'),
      accepting: isDraining() ? notReady('shutting down') : READY,
    }
  }
}

/** Whether every check passed. */
export function allReady(checks: Record<string, CheckResult>): boolean {
  return Object.values(checks).every((check) => check.ready)
}
