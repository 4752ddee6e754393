/**
 * The caller's agency's sub-accounts. Every statement is bound to the
 * agency (`agency_id = $1`): another agency's sub-account is never found.
 */
import type { Pool } from '@scoped/shared/db'
import { inTransaction, pgErrorCode, pgErrorCodes } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import type { ListQuery, Page } from '@scoped/shared/pagination'
import { listTenantPage } from '@scoped/shared/pagination'
import type { ActorInput } from '../audit/actor.js'
import { toActor } from '../audit/actor.js'
import { recordAuditEvent } from '../audit/audit-log.js'
import type { KeyService, PendingInvalidation } from '../keys/key-service.js'

interface SubAccountRow {
  id: string
  agency_id: string
  name: string
  created_at: Date
  updated_at: Date
}

export interface SubAccount {
  id: string
  agencyId: string
  name: string
  createdAt: string
  updatedAt: string
}

function toItem(row: SubAccountRow): SubAccount {
  return { id: row.id, agencyId: row.agency_id, name: row.name, createdAt: row.created_at.toISOString(), updatedAt: row.updated_at.toISOString() }
}

export class SubAccountStore {
  constructor(
    private readonly pool: Pool,
    private readonly keys: KeyService,
  ) {}

  async list(agencyId: string, query: ListQuery): Promise<Page<SubAccount>> {
    return listTenantPage(this.pool, { table: 'sub_accounts', tenantColumn: 'agency_id', tenantId: agencyId, query, toItem })
  }

  async find(agencyId: string, id: string): Promise<SubAccount | undefined> {
    const { rows } = await this.pool.query<SubAccountRow>(`SELECT * FROM sub_accounts WHERE agency_id = $1 AND id = $2`, [agencyId, id])
    return rows[0] && toItem(rows[0])
  }

  async create(agencyId: string, name: string, actor: ActorInput): Promise<SubAccount> {
    try {
      return await inTransaction(this.pool, async (client) => {
        const { rows } = await client.query<SubAccountRow>(`INSERT INTO sub_accounts (agency_id, name) VALUES ($1, $2) RETURNING *`, [agencyId, name])
        const row = rows[0]!
        await recordAuditEvent(client, { type: 'sub-account.created', actor: toActor(actor), agencyId, subAccountId: row.id })
        return toItem(row)
      })
    } catch (error) {
      if (pgErrorCode(error) === pgErrorCodes.foreignKeyViolation) throw new ApiError('agencyNotFound')
      throw error
    }
  }

  async rename(agencyId: string, id: string, name: string): Promise<SubAccount | undefined> {
    const { rows } = await this.pool.query<SubAccountRow>(
      `UPDATE sub_accounts SET name = $3, updated_at = now() WHERE agency_id = $1 AND id = $2 RETURNING *`,
      [agencyId, id, name],
    )
    return rows[0] && toItem(rows[0])
  }

  /**
   * Deletes a sub-account with its keys and resources in one transaction:
   * its keys through the key service (so each leaves a tombstone and an
   * audit event), then the row (and its own audit event), whose deletion cascades to the agents,
   * contacts and calls. Answers the keys whose gateway caches must be
   * invalidated once committed, or undefined when the agency has no such sub-account.
   */
  async delete(agencyId: string, id: string, actor: ActorInput): Promise<PendingInvalidation | undefined> {
    return inTransaction(this.pool, async (client) => {
      // The row lock also waits for (and then stops) a key being created for this sub-account.
      const { rows } = await client.query(`SELECT id FROM sub_accounts WHERE agency_id = $1 AND id = $2 FOR UPDATE`, [agencyId, id])
      if (rows.length === 0) return undefined
      const pending = await this.keys.deleteAllOfSubAccount(client, id, actor)
      await client.query(`DELETE FROM sub_accounts WHERE id = $1`, [id])
      await recordAuditEvent(client, { type: 'sub-account.deleted', actor: toActor(actor), agencyId, subAccountId: id })
      return pending
    })
  }

  /** Whether the agency has this sub-account (the check every nested route makes first). */
  async exists(agencyId: string, id: string): Promise<boolean> {
    const { rowCount } = await this.pool.query(`SELECT 1 FROM sub_accounts WHERE agency_id = $1 AND id = $2`, [agencyId, id])
    return rowCount === 1
  }
}
