/**
 * Agencies, sub-accounts and console users, as the operator CLI creates
 * them: a store over the pool, like SubAccountStore and KeyService.
 */
import type { Pool } from '@scoped/shared/db'
import { inTransaction, pgErrorCode, pgErrorCodes } from '@scoped/shared/db'
import { ApiError, invalidField } from '@scoped/shared/errors'
import { hashPassword, passwordProblem } from '@scoped/shared/passwords'
import { requireName, requireUuid } from '@scoped/shared/validation'
import type { ActorInput } from './audit/actor.js'
import { toActor } from './audit/actor.js'
import { recordAuditEvent } from './audit/audit-log.js'
import { requireEmail } from './users/email.js'
import { isRole, roles } from './users/roles.js'

export interface NewUser {
  email: unknown
  password: string
  agencyId: unknown
  role: unknown
  subAccountId?: unknown
}

export interface Agency {
  id: string
  name: string
  createdAt: string
}

export class TenantStore {
  constructor(private readonly pool: Pool) {}

  /** An agency by id, or undefined. */
  async findAgency(agencyId: string): Promise<Agency | undefined> {
    const { rows } = await this.pool.query<{ id: string; name: string; created_at: Date }>(`SELECT id, name, created_at FROM agencies WHERE id = $1`, [
      agencyId,
    ])
    const row = rows[0]
    return row === undefined ? undefined : { id: row.id, name: row.name, createdAt: row.created_at.toISOString() }
  }

  async createAgency(name: unknown): Promise<{ id: string; name: string }> {
    const agencyName = requireName(name, 'name')
    const { rows } = await this.pool.query<{ id: string; name: string }>(`INSERT INTO agencies (name) VALUES ($1) RETURNING id, name`, [agencyName])
    return rows[0]!
  }

  /** A sub-account of an agency; its creation goes into the agency's audit trail as done by `actor`. */
  async createSubAccount(agencyId: unknown, name: unknown, actor: ActorInput = 'system'): Promise<{ id: string; agencyId: string; name: string }> {
    const agency = requireUuid(agencyId, 'agency id')
    const subAccountName = requireName(name, 'name')
    try {
      return await inTransaction(this.pool, async (client) => {
        const { rows } = await client.query<{ id: string; agency_id: string; name: string }>(
          `INSERT INTO sub_accounts (agency_id, name) VALUES ($1, $2) RETURNING id, agency_id, name`,
          [agency, subAccountName],
        )
        const row = rows[0]!
        await recordAuditEvent(client, { type: 'sub-account.created', actor: toActor(actor), agencyId: row.agency_id, subAccountId: row.id })
        return { id: row.id, agencyId: row.agency_id, name: row.name }
      })
    } catch (error) {
      if (pgErrorCode(error) === pgErrorCodes.foreignKeyViolation) throw new ApiError('agencyNotFound')
      throw error
    }
  }

  /**
   * A console user with a role in one agency and, optionally, membership of
   * one of its sub-accounts; its creation goes into that agency's audit trail
   * as done by `actor`. An existing email is refused (409): no path changes
   * an existing user's role.
   */
  async createUser(input: NewUser, actor: ActorInput = 'system'): Promise<{ id: string; email: string }> {
    const email = requireEmail(input.email)
    const agencyId = requireUuid(input.agencyId, 'agency id')
    if (!isRole(input.role)) throw invalidField('role', `must be one of ${roles.join(', ')}`)
    const role = input.role
    const subAccountId = input.subAccountId === undefined ? undefined : requireUuid(input.subAccountId, 'sub-account id')
    // Length (one maximum with sign-in) and the bundled list of common passwords.
    const problem = passwordProblem(input.password)
    if (problem !== undefined) throw new ApiError('badRequest', problem, { field: 'password' })
    const passwordHash = await hashPassword(input.password)
    return inTransaction(this.pool, async (client) => {
      const agency = await client.query(`SELECT 1 FROM agencies WHERE id = $1`, [agencyId])
      if (agency.rowCount === 0) throw new ApiError('agencyNotFound')
      if (subAccountId !== undefined) {
        const sub = await client.query(`SELECT 1 FROM sub_accounts WHERE id = $1 AND agency_id = $2`, [subAccountId, agencyId])
        if (sub.rowCount === 0) throw new ApiError('subAccountNotFound')
      }
      const inserted = await client.query<{ id: string }>(
        `INSERT INTO users (email, password_hash) VALUES ($1, $2) ON CONFLICT (email) DO NOTHING RETURNING id`,
        [email, passwordHash],
      )
      const user = inserted.rows[0]
      if (user === undefined) throw new ApiError('conflict', 'A user with this email already exists')
      await client.query(`INSERT INTO agency_memberships (user_id, agency_id, role) VALUES ($1, $2, $3)`, [user.id, agencyId, role])
      if (subAccountId !== undefined) {
        await client.query(`INSERT INTO sub_account_memberships (user_id, sub_account_id) VALUES ($1, $2)`, [user.id, subAccountId])
      }
      await recordAuditEvent(client, {
        type: 'user.created',
        actor: toActor(actor),
        agencyId,
        subAccountId: subAccountId ?? null,
        user: { id: user.id, email, role },
      })
      return { id: user.id, email }
    })
  }
}
