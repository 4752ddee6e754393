/**
 * What the audit page tells about the keys its events name, read from the
 * keys as they are now (within the agency): the hint, where the key's row is
 * in its list, and for a rolled key the key that replaced it and when the old
 * one stopped (or stops) working. A deleted key has none of it; the event's
 * own hint, kept since migration 022, still names it.
 */
import type { Pool } from '@scoped/shared/db'
import { isUuid } from '@scoped/shared/db'

export interface AuditKeyFacts {
  hint: string
  subAccountId: string | null
  /** The key that replaced it, if any and still there. */
  successor: { id: string; hint: string } | null
  /** When it stops (or stopped) working: its expiry, or the end of a roll's grace. */
  expiresAt: string | null
}

export async function auditKeyFacts(pool: Pool, keyIds: ReadonlyArray<string | null>, agencyId: string): Promise<ReadonlyMap<string, AuditKeyFacts>> {
  const ids = [...new Set(keyIds.filter((id): id is string => isUuid(id)))]
  if (ids.length === 0) return new Map()
  const { rows } = await pool.query<{
    id: string
    hint: string
    sub_account_id: string | null
    expires_at: Date | null
    successor_id: string | null
    successor_hint: string | null
  }>(
    `SELECT k.id, k.hint, k.sub_account_id, k.expires_at, s.id AS successor_id, s.hint AS successor_hint
     FROM api_keys k LEFT JOIN api_keys s ON s.id = k.replaced_by
     WHERE k.id = ANY($1::uuid[]) AND k.agency_id = $2`,
    [ids, agencyId],
  )
  return new Map(
    rows.map((row) => [
      row.id,
      {
        hint: row.hint,
        subAccountId: row.sub_account_id,
        successor: row.successor_id === null || row.successor_hint === null ? null : { id: row.successor_id, hint: row.successor_hint },
        expiresAt: row.expires_at === null ? null : row.expires_at.toISOString(),
      },
    ]),
  )
}
