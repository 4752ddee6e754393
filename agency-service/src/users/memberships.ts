/**
 * Removing a user's membership of an agency or of a sub-account, with an
 * audit event `membership.removed` for each membership that goes, in the
 * transaction that removes it:
 *
 * - an agency membership: the event carries the role the user had; the
 *   user's sub-account memberships in that agency go with it (a sub-account
 *   membership grants nothing without the agency's, console/access.ts), each
 *   with its own event naming the sub-account;
 * - a sub-account membership: the event names the sub-account and carries the
 *   user's role in its agency (null when they have none).
 *
 * An agency keeps at least one owner: the database refuses a removal that
 * would leave it without one (migration 014), also when two owners remove
 * each other at the same moment, and the removal answers 409.
 *
 * The user keeps their account and their other memberships; their sessions
 * stay, and every page they open is judged on what they still belong to.
 */
import type { Pool, PoolClient } from '@scoped/shared/db'
import { inTransaction } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { requireUuid } from '@scoped/shared/validation'
import type { ActorInput } from '../audit/actor.js'
import { toActor } from '../audit/actor.js'
import { recordAuditEvent } from '../audit/audit-log.js'
import type { Role } from './roles.js'
import type { UserRef } from './user-service.js'
import { UserService } from './user-service.js'

/** Which membership: of an agency (and with it its sub-accounts'), or of one sub-account. */
export type MembershipTarget = { agencyId: string } | { subAccountId: string }

/** The database's refusal to leave an agency without an owner (migration 014), whichever removal came second. */
function keepsAnOwner(error: unknown): boolean {
  return typeof error === 'object' && error !== null && 'constraint' in error && error.constraint === 'agency_keeps_an_owner'
}

async function removeAgencyMembership(client: PoolClient, user: UserRef, agencyId: string, actor: ActorInput): Promise<void> {
  const agency = await client.query(`SELECT 1 FROM agencies WHERE id = $1`, [agencyId])
  if (agency.rowCount === 0) throw new ApiError('agencyNotFound')
  const removed = await client
    .query<{ role: Role }>(`DELETE FROM agency_memberships WHERE user_id = $1 AND agency_id = $2 RETURNING role`, [user.id, agencyId])
    .catch((error: unknown) => {
      throw keepsAnOwner(error) ? new ApiError('conflict', `${user.email} is the last owner of this agency: an agency keeps at least one owner`) : error
    })
  const role = removed.rows[0]?.role
  if (role === undefined) throw new ApiError('membershipNotFound', `${user.email} is not a member of this agency`)
  const subAccounts = await client.query<{ sub_account_id: string }>(
    `DELETE FROM sub_account_memberships sm USING sub_accounts s
     WHERE sm.user_id = $1 AND s.id = sm.sub_account_id AND s.agency_id = $2
     RETURNING sm.sub_account_id`,
    [user.id, agencyId],
  )
  const event = { type: 'membership.removed', actor: toActor(actor), agencyId, user: { ...user, role } } as const
  await recordAuditEvent(client, { ...event, subAccountId: null })
  for (const row of subAccounts.rows.sort((a, b) => a.sub_account_id.localeCompare(b.sub_account_id))) {
    await recordAuditEvent(client, { ...event, subAccountId: row.sub_account_id })
  }
}

/** `agencyId`, when given, is the agency the sub-account must belong to (the console's): another agency's is not found. */
async function removeSubAccountMembership(client: PoolClient, user: UserRef, subAccountId: string, actor: ActorInput, agencyId?: string): Promise<void> {
  const sub = await client.query<{ agency_id: string }>(`SELECT agency_id FROM sub_accounts WHERE id = $1`, [subAccountId])
  const subAgencyId = sub.rows[0]?.agency_id
  if (subAgencyId === undefined || (agencyId !== undefined && subAgencyId !== agencyId)) throw new ApiError('subAccountNotFound')
  const removed = await client.query(`DELETE FROM sub_account_memberships WHERE user_id = $1 AND sub_account_id = $2`, [user.id, subAccountId])
  if (removed.rowCount === 0) throw new ApiError('membershipNotFound', `${user.email} is not a member of this sub-account`)
  const membership = await client.query<{ role: Role }>(`SELECT role FROM agency_memberships WHERE user_id = $1 AND agency_id = $2`, [user.id, subAgencyId])
  await recordAuditEvent(client, {
    type: 'membership.removed',
    actor: toActor(actor),
    agencyId: subAgencyId,
    subAccountId,
    user: { ...user, role: membership.rows[0]?.role ?? null },
  })
}

export class MembershipService {
  private readonly users: UserService

  constructor(private readonly pool: Pool) {
    this.users = new UserService(pool)
  }

  /** `ctl user remove --email E (--agency A | --sub-account S)`. */
  async remove(
    email: unknown,
    target: { agencyId: unknown } | { subAccountId: unknown },
    actor: ActorInput,
  ): Promise<{ id: string; email: string; removed: true }> {
    const membership: MembershipTarget =
      'agencyId' in target ? { agencyId: requireUuid(target.agencyId, 'agency id') } : { subAccountId: requireUuid(target.subAccountId, 'sub-account id') }
    const user = await this.users.findByEmail(email)
    await inTransaction(this.pool, (client) =>
      'agencyId' in membership
        ? removeAgencyMembership(client, user, membership.agencyId, actor)
        : removeSubAccountMembership(client, user, membership.subAccountId, actor),
    )
    return { id: user.id, email: user.email, removed: true }
  }

  /**
   * The console's removal, by an owner of `agencyId`, of a member of it: the
   * agency membership (no `subAccountId`), or the membership of one of the
   * agency's sub-accounts (another agency's sub-account, or a user who is
   * not a member of the agency, is not found).
   */
  async removeMember(agencyId: string, userId: string, subAccountId: string | undefined, actor: ActorInput): Promise<UserRef> {
    return inTransaction(this.pool, async (client) => {
      const { rows } = await client.query<UserRef>(
        `SELECT u.id, u.email FROM users u JOIN agency_memberships m ON m.user_id = u.id AND m.agency_id = $2 WHERE u.id = $1`,
        [userId, agencyId],
      )
      const user = rows[0]
      if (user === undefined) throw new ApiError('userNotFound')
      if (subAccountId === undefined) await removeAgencyMembership(client, user, agencyId, actor)
      else await removeSubAccountMembership(client, user, subAccountId, actor, agencyId)
      return user
    })
  }
}
