/**
 * A key's status and whether it counts toward the limit of 25, from its
 * record and the clock: the rules in one pure place (the SQL that counts
 * says the same, COUNTED_KEY_SQL).
 *
 * | record                                   | status    | counts toward the limit |
 * |------------------------------------------|-----------|-------------------------|
 * | revoked                                  | `revoked` | no                      |
 * | expiry reached (chosen, or a roll's end) | `expired` | no                      |
 * | rolled, in its grace period              | `active`  | no                      |
 * | otherwise                                | `active`  | yes                     |
 */
export type KeyStatus = 'active' | 'revoked' | 'expired'

export interface KeyLifecycleFields {
  revokedAt: Date | null
  expiresAt: Date | null
  /** The key that replaced this one (a roll), or null. */
  replacedBy: string | null
}

/** The status at `nowMs` (epoch milliseconds): expired from the expiry's instant on. */
export function keyStatus(key: Pick<KeyLifecycleFields, 'revokedAt' | 'expiresAt'>, nowMs: number): KeyStatus {
  if (key.revokedAt !== null) return 'revoked'
  if (key.expiresAt !== null && nowMs >= key.expiresAt.getTime()) return 'expired'
  return 'active'
}

/** Whether the key takes one of its tenant's 25 places at `nowMs`: active and not rolled. */
export function countsTowardLimit(key: KeyLifecycleFields, nowMs: number): boolean {
  return keyStatus(key, nowMs) === 'active' && key.replacedBy === null
}

/** The same rule in SQL, against the database's clock, for the count under the tenant's lock. */
export const COUNTED_KEY_SQL = `revoked_at IS NULL AND replaced_by IS NULL AND (expires_at IS NULL OR expires_at > now())`

/** The longest grace period of a roll: 30 days. */
export const MAX_GRACE_SECONDS = 30 * 24 * 60 * 60
