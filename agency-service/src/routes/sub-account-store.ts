/**
 * The caller's agency's sub-accounts. Every statement is bound to the
 * agency (`agency_id = $1`): another agency's sub-account is never found.
 */
import type { Pool, PoolClient } from '@scoped/shared/db'
import { inTransaction, pgErrorCode, pgErrorCodes } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import type { ListQuery, Page } from '@scoped/shared/pagination'
import { listTenantPage } from '@scoped/shared/pagination'
import type { RateLimit } from '@scoped/shared/rate-limit'
import type { ActorInput } from '../audit/actor.js'
import { toActor } from '../audit/actor.js'
import { recordAuditEvent } from '../audit/audit-log.js'
import type { KeyFieldNames, KeyService, PendingInvalidation, RateLimitInput } from '../keys/key-service.js'
import { checkedRateLimit } from '../keys/key-input.js'

interface SubAccountRow {
  id: string
  agency_id: string
  name: string
  created_at: Date
  updated_at: Date
  key_rate_limit_rate: number | null
  key_rate_limit_burst: number | null
}

export interface SubAccount {
  id: string
  agencyId: string
  name: string
  createdAt: string
  updatedAt: string
  /** The rate limit every new key of the sub-account gets unless it is given one of its own (its agency sets it); null: the routes file's. */
  keyRateLimit: RateLimit | null
}

function toItem(row: SubAccountRow): SubAccount {
  const keyRateLimit =
    row.key_rate_limit_rate === null || row.key_rate_limit_burst === null ? null : { rate: row.key_rate_limit_rate, burst: row.key_rate_limit_burst }
  return { id: row.id, agencyId: row.agency_id, name: row.name, createdAt: row.created_at.toISOString(), updatedAt: row.updated_at.toISOString(), keyRateLimit }
}

/**
 * Sets (or with null clears) a sub-account's default rate limit for its new
 * keys, with a sub-account.updated event when it changed; bound to the agency
 * when one is given (the API, the console), any sub-account for ctl. Keys that
 * exist keep their own limits (change them with key update). Undefined when
 * there is no such sub-account.
 */
export async function setKeyRateLimit(
  client: PoolClient,
  target: { id: string; agencyId?: string },
  input: RateLimitInput | null,
  actor: ActorInput,
  fields?: KeyFieldNames,
): Promise<SubAccount | undefined> {
  const limit = checkedRateLimit(input, fields)
  const { rows } = await client.query<SubAccountRow & { changed: boolean }>(
    `WITH old AS (SELECT id, key_rate_limit_rate, key_rate_limit_burst FROM sub_accounts WHERE id = $1 AND ($2::uuid IS NULL OR agency_id = $2) FOR UPDATE)
     UPDATE sub_accounts s SET key_rate_limit_rate = $3, key_rate_limit_burst = $4, updated_at = now() FROM old WHERE s.id = old.id
     RETURNING s.*, (old.key_rate_limit_rate IS DISTINCT FROM $3::float8 OR old.key_rate_limit_burst IS DISTINCT FROM $4::int) AS changed`,
    [target.id, target.agencyId ?? null, limit?.rate ?? null, limit?.burst ?? null],
  )
  const row = rows[0]
  if (row === undefined) return undefined
  if (row.changed) await recordAuditEvent(client, { type: 'sub-account.updated', actor: toActor(actor), agencyId: row.agency_id, subAccountId: row.id })
  return toItem(row)
}

/** How the API names the default's fields in its messages. */
export const KEY_RATE_LIMIT_FIELDS = { rate: 'body.keyRateLimit.rate', burst: 'body.keyRateLimit.burst' }

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

  /** A rename is a change like any (sub-account.updated, by `actor`; unattributed when none is given). */
  async rename(agencyId: string, id: string, name: string, actor?: ActorInput): Promise<SubAccount | undefined> {
    return inTransaction(this.pool, async (client) => {
      const { rows } = await client.query<SubAccountRow>(`UPDATE sub_accounts SET name = $3, updated_at = now() WHERE agency_id = $1 AND id = $2 RETURNING *`, [
        agencyId,
        id,
        name,
      ])
      const row = rows[0]
      if (row === undefined) return undefined
      if (actor !== undefined) await recordAuditEvent(client, { type: 'sub-account.updated', actor: toActor(actor), agencyId, subAccountId: row.id })
      return toItem(row)
    })
  }

  /** The agency's sub-account's default key rate limit (setKeyRateLimit); undefined when the agency has no such sub-account. */
  async setKeyRateLimit(agencyId: string, id: string, input: RateLimitInput | null, actor: ActorInput): Promise<SubAccount | undefined> {
    return inTransaction(this.pool, (client) => setKeyRateLimit(client, { id, agencyId }, input, actor, KEY_RATE_LIMIT_FIELDS))
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
