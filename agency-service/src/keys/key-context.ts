/**
 * What every step of the key lifecycle shares: the pool, the clock keys are
 * judged by, and the way to tell the gateways once a change has committed.
 * KeyService is the one implementation; the steps take it as a parameter so
 * each can live in a file of its own.
 */
import type { Pool } from '@scoped/shared/db'
import type { InvalidationReport } from '@scoped/shared/key-invalidation'
import type { KeyInvalidation } from '@scoped/shared/key-state'
import type { PermissionCatalog } from './permission-catalog.js'

/** Keys ended inside a caller's transaction, to pass to `invalidate` once that transaction has committed. */
export interface PendingInvalidation {
  keys: KeyInvalidation[]
  /** The transaction that ended them. */
  xid: string
}

export interface KeyContext {
  readonly pool: Pool
  /** The permission names the routes file declares (ROUTES_FILE): what a key may be given. */
  readonly permissions: PermissionCatalog
  /** The clock (epoch ms) key statuses and expiries are judged by. */
  now(): number
  /**
   * Tells every gateway replica, once the transaction `pending.xid` has
   * committed, and waits for each to confirm; throws InvalidationNotConfirmed
   * (saying `what` happened and what was not confirmed) when that fails.
   */
  invalidate(pending: PendingInvalidation, what: string): Promise<InvalidationReport>
}
