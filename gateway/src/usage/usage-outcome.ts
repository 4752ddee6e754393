/**
 * How the gateway's own outcomes (outcomes.ts) read in a key's usage: the
 * contract's closed list (shared/src/usage.ts). Every gateway outcome is
 * mapped here, so a new one fails the type-check until it is placed.
 * `served` is every request that was forwarded; its status class says how the
 * backend (or the way to it: 502, 503) answered. Outcomes a request with a
 * known key cannot have (no key, the documents, the console) map to
 * bad-request, never seen in practice. `null`: never counted. An answer that
 * says authentication is unavailable (503) is not attributed to the key, even
 * when the gate had found it before a re-check failed: the client cannot tell
 * one such answer from another, and a count that the client can check must
 * not depend on where the failure happened. Nor is `deleted` ever counted: a
 * deleted key no longer exists for its tenant.
 */
import type { UsageOutcome } from '@scoped/shared/usage'
import type { RequestOutcome } from '../outcomes.js'

export const USAGE_OUTCOME = {
  forwarded: 'served',
  'upstream-busy': 'served',
  'upstream-share': 'served',
  'upstream-error': 'served',
  error: 'served',
  unavailable: null,
  draining: 'served',
  revoked: 'revoked',
  deleted: null,
  expired: 'expired',
  'not-allowed-address': 'address-refused',
  'scope-mismatch': 'scope-refused',
  'permission-refused': 'permission-refused',
  'no-route': 'bad-request',
  'rate-limited': 'rate-limited',
  throttled: 'rate-limited',
  'documents-throttled': 'rate-limited',
  'request-timeout': 'timeout',
  'upstream-timeout': 'timeout',
  'bad-request': 'bad-request',
  'bad-json': 'bad-request',
  'too-deep': 'bad-request',
  'bad-path': 'bad-request',
  'uri-too-long': 'bad-request',
  'headers-too-large': 'bad-request',
  'method-not-allowed': 'bad-request',
  'https-required': 'bad-request',
  missing: 'bad-request',
  malformed: 'bad-request',
  unknown: 'bad-request',
  session: 'bad-request',
  document: 'bad-request',
  report: 'bad-request',
} as const satisfies Record<RequestOutcome, UsageOutcome | null>
