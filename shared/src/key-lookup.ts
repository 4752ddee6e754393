/**
 * What the gateway needs from Postgres: a key's state by its hash, and a
 * batched write of last-use times. Everything here works on the hash; the
 * plaintext never gets this far.
 */
import type { Pool } from './db.js'
import type { Tenant } from './tenant-signature.js'
import { isScope } from './scope.js'

export type KeyLookup =
  | { status: 'active'; tenant: Tenant }
  | { status: 'revoked' }
  | { status: 'deleted' }
  | { status: 'unknown' }

interface LookupRow {
  id: string | null
  scope: string | null
  agency_id: string | null
  sub_account_id: string | null
  revoked: boolean
  deleted: boolean
}

const LOOKUP_SQL = `
  SELECT id, scope, agency_id, sub_account_id, revoked_at IS NOT NULL AS revoked, false AS deleted
    FROM api_keys WHERE key_hash = $1
  UNION ALL
  SELECT NULL, NULL, NULL, NULL, false, true FROM deleted_api_keys WHERE key_hash = $1
  LIMIT 1`

export async function lookupKeyByHash(pool: Pool, hash: string): Promise<KeyLookup> {
  const { rows } = await pool.query<LookupRow>(LOOKUP_SQL, [hash])
  const row = rows[0]
  if (row === undefined) return { status: 'unknown' }
  if (row.deleted) return { status: 'deleted' }
  if (row.revoked) return { status: 'revoked' }
  if (row.id === null || row.agency_id === null || !isScope(row.scope)) throw new Error('api_keys row is incomplete')
  return {
    status: 'active',
    tenant: { scope: row.scope, agencyId: row.agency_id, subAccountId: row.sub_account_id, keyId: row.id },
  }
}

/**
 * Writes many last-use times in one statement. GREATEST keeps the newest time
 * when several gateway replicas flush out of order; revoked keys are written
 * too (spec §2: the last-used time is kept after revocation).
 */
export async function recordLastUse(pool: Pool, uses: ReadonlyMap<string, Date>): Promise<void> {
  if (uses.size === 0) return
  const ids = [...uses.keys()]
  const times = ids.map((id) => uses.get(id)!.toISOString())
  await pool.query(
    `UPDATE api_keys AS k
        SET last_used_at = GREATEST(COALESCE(k.last_used_at, '-infinity'::timestamptz), u.used_at)
       FROM unnest($1::uuid[], $2::timestamptz[]) AS u(id, used_at)
      WHERE k.id = u.id`,
    [ids, times],
  )
}
