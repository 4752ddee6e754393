/**
 * The one writer of the rate-limit header fields, in the structured-field
 * form of draft-ietf-httpapi-ratelimit-headers-11 (the latest revision
 * found): `RateLimit-Policy` names each limit as a quota `q` over a window
 * `w` (seconds), `RateLimit` gives what is left `r` and the seconds `t` until
 * the limit is whole again, and a refusal adds `Retry-After` (delay-seconds,
 * the same as `t`, as the draft asks that it not end before the window does).
 * The route limits (every response of a limited route) and the
 * failed-authentication throttle (its 429) both write through here.
 */
import type { Limit, LimitKind } from '@scoped/shared/route-limits'
import type { BucketRef } from './buckets.js'

/** The names of the gateway's policies: plain tokens, so no sf-string escaping is ever needed. */
export type PolicyName = LimitKind | 'failed-auth' | 'documents'

/** A non-negative sf-integer (at most 15 digits). */
function sfInteger(value: number): number {
  return Math.min(999_999_999_999_999, Math.max(0, Math.ceil(value)))
}

/** One policy: `"name";q=<quota>;w=<window seconds, at least 1>`. */
export function policyItem(name: PolicyName, quota: number, windowSeconds: number): string {
  return `"${name}";q=${sfInteger(quota)};w=${sfInteger(Math.max(1, windowSeconds))}`
}

/** One policy's state: `"name";r=<remaining>;t=<seconds until whole>`. */
export function stateItem(name: PolicyName, remaining: number, resetSeconds: number): string {
  return `"${name}";r=${sfInteger(remaining)};t=${sfInteger(resetSeconds)}`
}

/** Retry-After in whole seconds, rounded up. */
export function retryAfter(seconds: number): string {
  return String(sfInteger(seconds))
}

/** A token bucket's window: the seconds it takes to fill from empty. */
function windowOf(limit: Limit): number {
  return limit.burst / limit.rate
}

const policies = new WeakMap<readonly BucketRef[], string>()

/** The RateLimit-Policy of a request: each of its buckets' limits, in the order they are taken (made once per set of buckets). */
export function rateLimitPolicy(refs: readonly BucketRef[]): string {
  let policy = policies.get(refs)
  if (policy === undefined) {
    policy = refs.map(({ kind, limit }) => policyItem(kind, limit.burst, windowOf(limit))).join(', ')
    policies.set(refs, policy)
  }
  return policy
}

/** The RateLimit of a request: what is left of each bucket, as this replica knows it. */
export function rateLimitState(refs: readonly BucketRef[], remaining: (ref: BucketRef) => number): string {
  let state = ''
  for (const ref of refs) {
    const left = Math.min(ref.limit.burst, remaining(ref))
    const item = stateItem(ref.kind, left, (ref.limit.burst - left) / ref.limit.rate)
    state = state === '' ? item : `${state}, ${item}`
  }
  return state
}

/** The headers of the failed-authentication throttle's 429: nothing left until its window ends. */
export function failedAuthHeaders(limit: number, windowSeconds: number, retryAfterSeconds: number): Record<string, string> {
  return {
    'ratelimit-policy': policyItem('failed-auth', limit, windowSeconds),
    ratelimit: stateItem('failed-auth', 0, retryAfterSeconds),
    'retry-after': retryAfter(retryAfterSeconds),
  }
}

/** The headers of a fixed-window budget (the documents'): the policy, what is left, and on a refusal Retry-After. */
export function budgetHeaders(name: PolicyName, limit: number, windowSeconds: number, remaining: number, resetSeconds: number): Record<string, string> {
  const headers: Record<string, string> = { 'ratelimit-policy': policyItem(name, limit, windowSeconds), ratelimit: stateItem(name, remaining, resetSeconds) }
  if (remaining <= 0) headers['retry-after'] = retryAfter(resetSeconds)
  return headers
}
