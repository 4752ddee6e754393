/**
 * Audit events about a user as a whole (disabled, password changed, signed
 * in, sign-in refused). The trail is per agency, and a user may belong to
 * several: the event is written once into the trail of each agency the user
 * belongs to at that moment, with their role there, so every agency's owners
 * see what happened to their members. A user who belongs to no agency leaves
 * no event (there is no trail to put it in); the service log still has it.
 */
import type { PoolClient } from '@scoped/shared/db'
import type { Actor } from '../audit/actor.js'
import type { AuditEventType } from '../audit/audit-log.js'
import { recordAuditEvent } from '../audit/audit-log.js'
import type { Role } from './roles.js'

export type UserEventType = Extract<AuditEventType, 'user.updated' | 'user.disabled' | 'user.password-changed' | 'user.signed-in' | 'user.sign-in-refused'>

export interface EventUser {
  id: string
  email: string
}

/** Records `type` about `user` in each of their agencies' trails, inside the caller's transaction; answers how many. */
export async function recordUserEvent(client: PoolClient, type: UserEventType, user: EventUser, actor: Actor, refusals?: number): Promise<number> {
  const { rows } = await client.query<{ agency_id: string; role: Role }>(
    `SELECT agency_id, role FROM agency_memberships WHERE user_id = $1 ORDER BY agency_id`,
    [user.id],
  )
  for (const membership of rows) {
    await recordAuditEvent(client, {
      type,
      actor,
      agencyId: membership.agency_id,
      subAccountId: null,
      user: { id: user.id, email: user.email, role: membership.role },
      refusals: refusals ?? null,
    })
  }
  return rows.length
}
