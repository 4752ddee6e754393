/**
 * The console user lifecycle past creation: disabling a user, setting a new
 * password (an operator's reset, or the user's own change), each with its
 * audit events, in one transaction with the change.
 *
 * Disabling sets `users.disabled_at` and deletes every console session of the
 * user in the same transaction, so the user's next request is sent to sign
 * in; sign-in refuses a disabled user (sign-in.ts), a session is never made
 * for one (sessions.ts locks the user row and checks), and a session that
 * somehow outlived the disable is not accepted (findSession). There is no
 * re-enable: an operator makes a new account instead.
 *
 * A new password meets the same rules as at creation (shared/passwords.ts:
 * length and the common-password list; scrypt at today's cost). An
 * operator's reset ends every session of the user (the usual reason for a
 * reset is that the password is known to someone else); a user's own change
 * ends every session but the one that made it.
 */
import type { Pool, PoolClient } from '@scoped/shared/db'
import { inTransaction } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { hashPassword, passwordProblem, verifyPassword } from '@scoped/shared/passwords'
import type { ActorInput } from '../audit/actor.js'
import { toActor } from '../audit/actor.js'
import { requireEmail } from './email.js'
import { recordUserEvent } from './user-events.js'

export interface UserRef {
  id: string
  email: string
}

interface LockedUser extends UserRef {
  disabled: boolean
}

/** The user row, locked against concurrent changes (and against new sessions and memberships) until the transaction ends. */
export async function lockUser(client: PoolClient, userId: string): Promise<LockedUser | undefined> {
  const { rows } = await client.query<{ id: string; email: string; disabled: boolean }>(
    `SELECT id, email, disabled_at IS NOT NULL AS disabled FROM users WHERE id = $1 FOR UPDATE`,
    [userId],
  )
  return rows[0]
}

/** Disables a locked user (once: disabling again changes and records nothing) and ends all their sessions. */
async function disableLocked(client: PoolClient, user: LockedUser, actor: ActorInput): Promise<void> {
  if (!user.disabled) {
    await client.query(`UPDATE users SET disabled_at = now() WHERE id = $1`, [user.id])
    await recordUserEvent(client, 'user.disabled', user, toActor(actor))
  }
  await client.query(`DELETE FROM console_sessions WHERE user_id = $1`, [user.id])
}

/** Why a new password is refused (a 400 with the rule's sentence), or nothing. */
function requireAcceptablePassword(password: string): void {
  const problem = passwordProblem(password)
  if (problem !== undefined) throw new ApiError('badRequest', problem, { field: 'password' })
}

/** The new session's token (the one presented is gone), or a refusal. */
export type OwnPasswordChange = { changed: true; token: string } | 'wrong-password'

/** Why an agency's owner may not disable an account that belongs to another agency too. */
export const SHARED_ACCOUNT_MESSAGE =
  'This user also belongs to another agency, so the account cannot be disabled from here: remove them from this agency instead'

export class UserService {
  constructor(private readonly pool: Pool) {}

  /** The user with this email; a 404 naming it when there is none. */
  async findByEmail(email: unknown): Promise<UserRef> {
    const normalized = requireEmail(email)
    const { rows } = await this.pool.query<UserRef>(`SELECT id, email FROM users WHERE email = $1`, [normalized])
    const user = rows[0]
    if (user === undefined) throw new ApiError('userNotFound', `No user has the email ${normalized}`)
    return user
  }

  /** `ctl user disable`: the user's sessions end at once and sign-in is refused, in every agency. */
  async disable(email: unknown, actor: ActorInput): Promise<{ id: string; email: string; disabled: true }> {
    const found = await this.findByEmail(email)
    return inTransaction(this.pool, async (client) => {
      const user = await lockUser(client, found.id)
      if (user === undefined) throw new ApiError('userNotFound', `No user has the email ${found.email}`)
      await disableLocked(client, user, actor)
      return { id: user.id, email: user.email, disabled: true }
    })
  }

  /**
   * The console's disable, by an owner of `agencyId`: only for a member of
   * that agency who belongs to no other one, since the account is shared by
   * every agency the user belongs to and one agency must not lock a person
   * out of another's (remove the membership instead). 404 for a user who is
   * not a member; 409 for one who belongs elsewhere too.
   */
  async disableMember(agencyId: string, userId: string, actor: ActorInput): Promise<UserRef> {
    return inTransaction(this.pool, async (client) => {
      // The lock also holds back a membership being added meanwhile (its foreign key check waits for it).
      const user = await lockUser(client, userId)
      if (user === undefined) throw new ApiError('userNotFound')
      const { rows } = await client.query<{ agency_id: string }>(`SELECT agency_id FROM agency_memberships WHERE user_id = $1`, [userId])
      if (!rows.some((row) => row.agency_id === agencyId)) throw new ApiError('userNotFound')
      if (rows.length > 1) throw new ApiError('conflict', SHARED_ACCOUNT_MESSAGE)
      await disableLocked(client, user, actor)
      return { id: user.id, email: user.email }
    })
  }

  /** `ctl user password`: a new password, by the policy; every session of the user ends. */
  async setPassword(user: UserRef, password: string, actor: ActorInput): Promise<UserRef> {
    requireAcceptablePassword(password)
    const passwordHash = await hashPassword(password)
    return inTransaction(this.pool, async (client) => {
      const locked = await lockUser(client, user.id)
      if (locked === undefined) throw new ApiError('userNotFound', `No user has the email ${user.email}`)
      await client.query(`UPDATE users SET password_hash = $2 WHERE id = $1`, [locked.id, passwordHash])
      await client.query(`DELETE FROM console_sessions WHERE user_id = $1`, [locked.id])
      await recordUserEvent(client, 'user.password-changed', locked, toActor(actor))
      return { id: locked.id, email: locked.email }
    })
  }

  /**
   * A signed-in user's own change: the new password meets the policy (a 400
   * otherwise, before anything else), the current one must be right (one
   * scrypt; the caller throttles wrong guesses like failed sign-ins). Every
   * session of the user ends, the one it was made in included, and
   * `newSession` makes the one that replaces it in the same transaction: the
   * token that was presented with the old password is worth nothing after the
   * change. A disabled user, or a password changed by someone else since it
   * was checked, changes nothing ('wrong-password').
   */
  async changeOwnPassword(
    userId: string,
    current: string,
    next: string,
    actor: ActorInput,
    newSession: (client: PoolClient) => Promise<string | undefined>,
  ): Promise<OwnPasswordChange> {
    // The new password's rules first: a refusal of it then says nothing about whether the current one was right.
    requireAcceptablePassword(next)
    const { rows } = await this.pool.query<{ password_hash: string }>(`SELECT password_hash FROM users WHERE id = $1 AND disabled_at IS NULL`, [userId])
    const checked = rows[0]?.password_hash
    if (checked === undefined || !(await verifyPassword(current, checked))) return 'wrong-password'
    const passwordHash = await hashPassword(next)
    return inTransaction(this.pool, async (client) => {
      const user = await lockUser(client, userId)
      const updated = await client.query(`UPDATE users SET password_hash = $2 WHERE id = $1 AND password_hash = $3 AND disabled_at IS NULL`, [
        userId,
        passwordHash,
        checked,
      ])
      if (user === undefined || updated.rowCount === 0) return 'wrong-password'
      await client.query(`DELETE FROM console_sessions WHERE user_id = $1`, [userId])
      const token = await newSession(client)
      if (token === undefined) throw new Error('no session could be made for a user locked as enabled')
      await recordUserEvent(client, 'user.password-changed', user, toActor(actor))
      return { changed: true, token }
    })
  }
}
