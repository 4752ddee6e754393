/**
 * Invitations to an agency (or to one of its sub-accounts as a member): an
 * owner or admin invites an email with a role; the link carries a random
 * token that is shown once (only its SHA-256 hash is stored), works until it
 * expires or is used, and is accepted by setting a password, which creates
 * the account with its membership (TenantStore.createUser: the same checks
 * as `ctl user create`). Both steps are in the audit trail
 * (invitation.created, invitation.accepted, and the user.created between).
 */
import { createHash, randomBytes } from 'node:crypto'
import type { Pool } from '@scoped/shared/db'
import { inTransaction } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { passwordProblem } from '@scoped/shared/passwords'
import type { Actor } from '../audit/actor.js'
import { userActor } from '../audit/actor.js'
import { recordAuditEvent } from '../audit/audit-log.js'
import { TenantStore } from '../tenants.js'
import { requireEmail } from './email.js'

/** How long an invitation link works. */
export const INVITATION_LIFETIME_MS = 7 * 86_400_000

export type InvitedRole = 'admin' | 'member'

export interface Invitation {
  agencyId: string
  agencyName: string
  subAccountId: string | null
  email: string
  role: InvitedRole
  expiresAt: Date
}

function tokenHash(token: string): string {
  return createHash('sha256').update(token).digest('hex')
}

export class InvitationStore {
  constructor(private readonly pool: Pool) {}

  /** A new invitation; answers its id and the token, which exists nowhere else. */
  async create(
    input: { agencyId: string; subAccountId: string | null; email: unknown; role: InvitedRole },
    inviter: Actor,
    now: Date,
  ): Promise<{ id: string; token: string; expiresAt: Date; email: string }> {
    const email = requireEmail(input.email)
    const token = randomBytes(32).toString('base64url')
    const expiresAt = new Date(now.getTime() + INVITATION_LIFETIME_MS)
    const id = await inTransaction(this.pool, async (client) => {
      const known = await client.query(`SELECT 1 FROM users WHERE email = $1`, [email])
      if (known.rowCount !== 0) throw new ApiError('conflict', 'A user with this email already exists: an operator adds them to the agency')
      const inserted = await client.query<{ id: string }>(
        `INSERT INTO console_invitations (token_hash, agency_id, sub_account_id, email, role, invited_by, created_at, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
        [tokenHash(token), input.agencyId, input.subAccountId, email, input.role, inviter.kind === 'user' ? inviter.id : null, now, expiresAt],
      )
      // The invitee has no user yet: their email and role are kept, without a user id.
      await recordAuditEvent(client, {
        type: 'invitation.created',
        actor: inviter,
        agencyId: input.agencyId,
        subAccountId: input.subAccountId,
        invitee: { email, role: input.role },
      })
      return inserted.rows[0]!.id
    })
    return { id, token, expiresAt, email }
  }

  /** An invitation of the agency by its id (for the page that shows its link once). */
  async ofAgency(id: string, agencyId: string): Promise<{ email: string; expiresAt: Date } | undefined> {
    const { rows } = await this.pool.query<{ email: string; expires_at: Date }>(
      `SELECT email, expires_at FROM console_invitations WHERE id = $1 AND agency_id = $2`,
      [id, agencyId],
    )
    const row = rows[0]
    return row === undefined ? undefined : { email: row.email, expiresAt: row.expires_at }
  }

  /** The invitation a link names, while it can still be accepted. */
  async find(token: string, now: Date): Promise<Invitation | undefined> {
    const { rows } = await this.pool.query<{
      agency_id: string
      agency_name: string
      sub_account_id: string | null
      email: string
      role: InvitedRole
      expires_at: Date
    }>(
      `SELECT i.agency_id, a.name AS agency_name, i.sub_account_id, i.email, i.role, i.expires_at
       FROM console_invitations i JOIN agencies a ON a.id = i.agency_id
       WHERE i.token_hash = $1 AND i.accepted_at IS NULL AND i.expires_at > $2`,
      [tokenHash(token), now],
    )
    const row = rows[0]
    if (row === undefined) return undefined
    return {
      agencyId: row.agency_id,
      agencyName: row.agency_name,
      subAccountId: row.sub_account_id,
      email: row.email,
      role: row.role,
      expiresAt: row.expires_at,
    }
  }

  /** Accepts once: claims the invitation, creates the account; a refusal leaves the invitation as it was. */
  async accept(token: string, password: string, clientAddress: string | undefined, now: Date): Promise<{ id: string; email: string }> {
    const problem = passwordProblem(password)
    if (problem !== undefined) throw new ApiError('badRequest', problem, { field: 'password' })
    const claimed = await this.pool.query<{ id: string; agency_id: string; sub_account_id: string | null; email: string; role: InvitedRole }>(
      `UPDATE console_invitations SET accepted_at = $2
       WHERE token_hash = $1 AND accepted_at IS NULL AND expires_at > $2
       RETURNING id, agency_id, sub_account_id, email, role`,
      [tokenHash(token), now],
    )
    const invitation = claimed.rows[0]
    if (invitation === undefined) throw new ApiError('notFound', 'This invitation has expired or was already used: ask for a new one')
    try {
      const user = await new TenantStore(this.pool).createUser(
        {
          email: invitation.email,
          password,
          agencyId: invitation.agency_id,
          role: invitation.role,
          ...(invitation.sub_account_id === null ? {} : { subAccountId: invitation.sub_account_id }),
        },
        `invitation:${invitation.id}`,
      )
      await inTransaction(this.pool, (client) =>
        recordAuditEvent(client, {
          type: 'invitation.accepted',
          actor: userActor(user.id, clientAddress),
          agencyId: invitation.agency_id,
          subAccountId: invitation.sub_account_id,
        }),
      )
      return user
    } catch (error) {
      await this.pool.query(`UPDATE console_invitations SET accepted_at = NULL WHERE id = $1`, [invitation.id])
      throw error
    }
  }
}
