/**
 * The key lifecycle (spec §3): create, list, revoke, delete.
 *
 * - At most 25 active keys per agency (agency-scope keys) and per sub-account,
 *   counted under a row lock on the owning tenant, so concurrent creations
 *   cannot overshoot.
 * - The plaintext is returned by `create` once and kept nowhere.
 * - Revoke and delete commit first, then invalidate every gateway replica's
 *   cache before returning (see @scoped/shared/key-invalidation).
 */
import type { Pool, PoolClient } from '@scoped/shared/db'
import { inTransaction } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { generateKey, hashKey, keyHint } from '@scoped/shared/keys'
import type { Scope } from '@scoped/shared/scope'
import type { InvalidationReport, KeyInvalidation, KeyInvalidator } from '@scoped/shared/key-invalidation'
import { requireName, requireUuid } from '../validation.js'

export const ACTIVE_KEY_LIMIT = 25
export const KEY_NAME_MAX_LENGTH = 100

/** The tenant that owns a key: an agency (AGENCY scope) or a sub-account (SUB-ACCOUNT scope). */
export type KeyOwner = { scope: 'AGENCY'; agencyId: string } | { scope: 'SUB-ACCOUNT'; subAccountId: string }

export interface CreatedKey {
  id: string
  name: string
  scope: Scope
  /** The plaintext, shown this once. */
  key: string
  agencyId: string
  subAccountId: string | null
  createdAt: string
}

export interface KeySummary {
  id: string
  name: string
  scope: Scope
  status: 'active' | 'revoked'
  hint: string
  createdAt: string
  lastUsedAt: string | null
  revokedAt: string | null
}

interface KeyRow {
  id: string
  name: string
  scope: Scope
  hint: string
  agency_id: string
  sub_account_id: string | null
  key_hash: string
  created_at: Date
  last_used_at: Date | null
  revoked_at: Date | null
}

export interface LifecycleResult {
  id: string
  invalidation: InvalidationReport
}

function iso(date: Date | null): string | null {
  return date === null ? null : date.toISOString()
}

function summary(row: KeyRow): KeySummary {
  return {
    id: row.id,
    name: row.name,
    scope: row.scope,
    status: row.revoked_at === null ? 'active' : 'revoked',
    hint: row.hint,
    createdAt: row.created_at.toISOString(),
    lastUsedAt: iso(row.last_used_at),
    revokedAt: iso(row.revoked_at),
  }
}

/** SQL that limits a statement to one owner's keys; `$n` is the owner id. */
function ownerCondition(owner: KeyOwner, parameter: number): string {
  return owner.scope === 'AGENCY' ? `scope = 'AGENCY' AND agency_id = $${parameter}` : `sub_account_id = $${parameter}`
}

function ownerId(owner: KeyOwner): string {
  return owner.scope === 'AGENCY' ? owner.agencyId : owner.subAccountId
}

function checkOwner(owner: KeyOwner): void {
  if (owner.scope === 'AGENCY') requireUuid(owner.agencyId, 'agency id')
  else requireUuid(owner.subAccountId, 'sub-account id')
}

export class KeyService {
  constructor(
    private readonly pool: Pool,
    private readonly invalidator: KeyInvalidator,
  ) {}

  async create(owner: KeyOwner, name: unknown, actor: string): Promise<CreatedKey> {
    checkOwner(owner)
    const keyName = requireName(name, 'name', KEY_NAME_MAX_LENGTH)
    return inTransaction(this.pool, async (client) => {
      const agencyId = await this.lockOwner(client, owner)
      const { rows } = await client.query<{ active: number }>(
        `SELECT count(*)::int AS active FROM api_keys WHERE ${ownerCondition(owner, 1)} AND revoked_at IS NULL`,
        [ownerId(owner)],
      )
      if ((rows[0]?.active ?? 0) >= ACTIVE_KEY_LIMIT) throw new ApiError('keyLimitReached')

      const key = generateKey()
      const subAccountId = owner.scope === 'SUB-ACCOUNT' ? owner.subAccountId : null
      const inserted = await client.query<{ id: string; created_at: Date }>(
        `INSERT INTO api_keys (scope, agency_id, sub_account_id, name, key_hash, hint, created_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id, created_at`,
        [owner.scope, agencyId, subAccountId, keyName, hashKey(key), keyHint(key), actor],
      )
      const row = inserted.rows[0]!
      await client.query(
        `INSERT INTO api_key_events (key_id, event, actor, scope, agency_id, sub_account_id, key_name)
         VALUES ($1, 'created', $2, $3, $4, $5, $6)`,
        [row.id, actor, owner.scope, agencyId, subAccountId, keyName],
      )
      return { id: row.id, name: keyName, scope: owner.scope, key, agencyId, subAccountId, createdAt: row.created_at.toISOString() }
    })
  }

  /** Newest first; never a plaintext or a hash. */
  async list(owner: KeyOwner): Promise<KeySummary[]> {
    checkOwner(owner)
    await this.requireOwner(this.pool, owner)
    const { rows } = await this.pool.query<KeyRow>(
      `SELECT * FROM api_keys WHERE ${ownerCondition(owner, 1)} ORDER BY created_at DESC, id DESC`,
      [ownerId(owner)],
    )
    return rows.map(summary)
  }

  /** One key, if it exists and (when `owner` is given) belongs to that owner. */
  async find(id: string, owner?: KeyOwner): Promise<KeySummary | undefined> {
    const row = await this.findRow(this.pool, id, owner)
    return row && summary(row)
  }

  async revoke(id: string, actor: string, owner?: KeyOwner): Promise<LifecycleResult> {
    const row = await inTransaction(this.pool, async (client) => {
      const found = await this.findRow(client, id, owner, true)
      if (found === undefined) throw new ApiError('keyNotFound')
      if (found.revoked_at === null) {
        await client.query(`UPDATE api_keys SET revoked_at = now(), revoked_by = $2 WHERE id = $1`, [id, actor])
        await this.recordEvent(client, found, 'revoked', actor)
      }
      return found
    })
    return { id: row.id, invalidation: await this.invalidator.invalidate([{ hash: row.key_hash, state: 'revoked' }]) }
  }

  async delete(id: string, actor: string, owner?: KeyOwner): Promise<LifecycleResult> {
    const row = await inTransaction(this.pool, async (client) => {
      const found = await this.findRow(client, id, owner, true)
      if (found === undefined) throw new ApiError('keyNotFound')
      await client.query(`DELETE FROM api_keys WHERE id = $1`, [id])
      await this.recordEvent(client, found, 'deleted', actor)
      return found
    })
    return { id: row.id, invalidation: await this.invalidator.invalidate([{ hash: row.key_hash, state: 'deleted' }]) }
  }

  /**
   * Deletes every key of a sub-account inside the caller's transaction (the
   * one that deletes the sub-account). The caller must pass the returned
   * invalidations to `invalidate` once that transaction has committed.
   */
  async deleteAllOfSubAccount(client: PoolClient, subAccountId: string, actor: string): Promise<KeyInvalidation[]> {
    const { rows } = await client.query<KeyRow>(`DELETE FROM api_keys WHERE sub_account_id = $1 RETURNING *`, [subAccountId])
    for (const row of rows) await this.recordEvent(client, row, 'deleted', actor)
    return rows.map((row) => ({ hash: row.key_hash, state: 'deleted' as const }))
  }

  invalidate(keys: readonly KeyInvalidation[]): Promise<InvalidationReport> {
    return this.invalidator.invalidate(keys)
  }

  private async findRow(db: Pool | PoolClient, id: string, owner?: KeyOwner, forUpdate = false): Promise<KeyRow | undefined> {
    requireUuid(id, 'key id')
    if (owner !== undefined) checkOwner(owner)
    const lock = forUpdate ? ' FOR UPDATE' : ''
    const { rows } =
      owner === undefined
        ? await db.query<KeyRow>(`SELECT * FROM api_keys WHERE id = $1${lock}`, [id])
        : await db.query<KeyRow>(`SELECT * FROM api_keys WHERE id = $1 AND ${ownerCondition(owner, 2)}${lock}`, [id, ownerId(owner)])
    return rows[0]
  }

  private async recordEvent(client: PoolClient, row: KeyRow, event: 'revoked' | 'deleted', actor: string): Promise<void> {
    await client.query(
      `INSERT INTO api_key_events (key_id, event, actor, scope, agency_id, sub_account_id, key_name)
       VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [row.id, event, actor, row.scope, row.agency_id, row.sub_account_id, row.name],
    )
  }

  /** Locks the owning tenant's row for the count-then-insert; answers the agency id. */
  private async lockOwner(client: PoolClient, owner: KeyOwner): Promise<string> {
    if (owner.scope === 'AGENCY') {
      const { rows } = await client.query<{ id: string }>(`SELECT id FROM agencies WHERE id = $1 FOR NO KEY UPDATE`, [owner.agencyId])
      if (rows[0] === undefined) throw new ApiError('agencyNotFound')
      return rows[0].id
    }
    const { rows } = await client.query<{ agency_id: string }>(`SELECT agency_id FROM sub_accounts WHERE id = $1 FOR NO KEY UPDATE`, [owner.subAccountId])
    if (rows[0] === undefined) throw new ApiError('subAccountNotFound')
    return rows[0].agency_id
  }

  private async requireOwner(db: Pool, owner: KeyOwner): Promise<void> {
    const { rows } =
      owner.scope === 'AGENCY'
        ? await db.query(`SELECT 1 FROM agencies WHERE id = $1`, [owner.agencyId])
        : await db.query(`SELECT 1 FROM sub_accounts WHERE id = $1`, [owner.subAccountId])
    if (rows.length === 0) throw new ApiError(owner.scope === 'AGENCY' ? 'agencyNotFound' : 'subAccountNotFound')
  }
}
