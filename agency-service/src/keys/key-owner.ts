/**
 * The tenant that owns a key, and the statements that find a key within it:
 * an id of another owner's key is answered exactly like one that does not
 * exist, and the count of a tenant's keys is made under a lock on its row.
 */
import type { Pool, PoolClient } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { requireUuid } from '@scoped/shared/validation'
import type { KeyRow } from './key-records.js'
import { KEY_COLUMNS } from './key-records.js'

/** The tenant that owns a key: an agency (AGENCY scope) or a sub-account (SUB-ACCOUNT scope). */
export type KeyOwner = { scope: 'AGENCY'; agencyId: string } | { scope: 'SUB-ACCOUNT'; subAccountId: string }

/** SQL that limits a statement to one owner's keys; `$n` is the owner id. */
export function ownerCondition(owner: KeyOwner, parameter: number): string {
  return owner.scope === 'AGENCY' ? `scope = 'AGENCY' AND agency_id = $${parameter}` : `sub_account_id = $${parameter}`
}

export function ownerId(owner: KeyOwner): string {
  return owner.scope === 'AGENCY' ? owner.agencyId : owner.subAccountId
}

export function ownerOfRow(row: KeyRow): KeyOwner {
  return row.scope === 'AGENCY' ? { scope: 'AGENCY', agencyId: row.agency_id } : { scope: 'SUB-ACCOUNT', subAccountId: row.sub_account_id! }
}

export function checkOwner(owner: KeyOwner): void {
  if (owner.scope === 'AGENCY') requireUuid(owner.agencyId, 'agency id')
  else requireUuid(owner.subAccountId, 'sub-account id')
}

/** One key, if it exists and (when `owner` is given) belongs to that owner; `forUpdate` locks its row. */
export async function findKeyRow(db: Pool | PoolClient, id: string, owner?: KeyOwner, forUpdate = false): Promise<KeyRow | undefined> {
  requireUuid(id, 'key id')
  if (owner !== undefined) checkOwner(owner)
  const lock = forUpdate ? ' FOR UPDATE' : ''
  const { rows } =
    owner === undefined
      ? await db.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = $1${lock}`, [id])
      : await db.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = $1 AND ${ownerCondition(owner, 2)}${lock}`, [id, ownerId(owner)])
  return rows[0]
}

/** The same, locked, or a 404. */
export async function lockKeyRow(client: PoolClient, id: string, owner?: KeyOwner): Promise<KeyRow> {
  const row = await findKeyRow(client, id, owner, true)
  if (row === undefined) throw new ApiError('keyNotFound')
  return row
}

/** Locks the owning tenant's row for the count-then-insert; answers the agency id. */
export async function lockOwner(client: PoolClient, owner: KeyOwner): Promise<string> {
  if (owner.scope === 'AGENCY') {
    const { rows } = await client.query<{ id: string }>(`SELECT id FROM agencies WHERE id = $1 FOR NO KEY UPDATE`, [owner.agencyId])
    if (rows[0] === undefined) throw new ApiError('agencyNotFound')
    return rows[0].id
  }
  const { rows } = await client.query<{ agency_id: string }>(`SELECT agency_id FROM sub_accounts WHERE id = $1 FOR NO KEY UPDATE`, [owner.subAccountId])
  if (rows[0] === undefined) throw new ApiError('subAccountNotFound')
  return rows[0].agency_id
}

/** A 404 naming the tenant when it does not exist. */
export async function requireOwner(db: Pool, owner: KeyOwner): Promise<void> {
  const { rows } =
    owner.scope === 'AGENCY'
      ? await db.query(`SELECT 1 FROM agencies WHERE id = $1`, [owner.agencyId])
      : await db.query(`SELECT 1 FROM sub_accounts WHERE id = $1`, [owner.subAccountId])
  if (rows.length === 0) throw new ApiError(owner.scope === 'AGENCY' ? 'agencyNotFound' : 'subAccountNotFound')
}
