/**
 * Who may do what with API keys in the console, decided in one place:
 *
 * | keys of       | may see the list                                | may create, roll, change, revoke, delete, and read the audit trail |
 * |---------------|-------------------------------------------------|--------------------------------------------------------------------|
 * | an agency     | every member of the agency (any role)           | its owners and admins                                              |
 * | a sub-account | its members, and the agency's owners and admins | the same people                                                    |
 *
 * A key's own rate limit is set by the agency's owners and admins only, for
 * agency and sub-account keys alike.
 *
 * A sub-account membership counts only together with a membership of the
 * sub-account's agency: removing a user from an agency ends their access to
 * its sub-accounts, whatever sub-account memberships remain.
 *
 * An agency's members (the members page: remove a membership, disable an
 * account) are managed by its owners only: removing or locking out a person,
 * an admin or another owner included, is more than key management, and an
 * admin must not be able to remove the owners above them.
 *
 * An agency or sub-account the user may not see is answered exactly as one
 * that does not exist (404); a visible one the user may not change is 403.
 */
import type { Pool } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { uuidOrNotFound } from '@scoped/shared/validation'
import type { Role } from '../users/roles.js'
import type { KeyOwner } from '../keys/key-service.js'
import type { ConsolePaths } from './paths.js'

const MANAGING_ROLES: readonly Role[] = ['owner', 'admin']

export function managesAgency(role: Role | null): boolean {
  return role !== null && MANAGING_ROLES.includes(role)
}

/** The tenant whose keys a console page shows, and what this user may do there. */
export interface KeyArea {
  owner: KeyOwner
  agency: { id: string; name: string }
  subAccount: { id: string; name: string } | null
  canManage: boolean
  /** Where this area's key pages live, e.g. <prefix>/agencies/<id>/keys. */
  keysPath: string
  /** Where this area's audit trail lives, e.g. <prefix>/agencies/<id>/audit. */
  auditPath: string
  /** Where this area's usage page lives (read by whoever may read its audit trail). */
  usagePath: string
  /** Who may read the trail: an agency's (with its sub-accounts'), its owners and admins; a sub-account's, whoever sees its keys. */
  canReadAudit: boolean
  /** Where the agency's members page lives, for its owners; null for everyone else and in a sub-account's settings. */
  membersPath: string | null
  /** Where the agency's webhooks page lives (a tab of every agency user; null in a sub-account's settings). */
  webhooksPath: string | null
  /** Who may see and change the agency's webhook endpoints: its owners and admins (the page tells members why not). */
  canManageWebhooks: boolean
  /**
   * Who may give a key a rate limit of its own: the agency's owners and admins only. A limit is the agency's
   * capacity to share out; a sub-account member who could raise their own key's limit would take it from the rest.
   */
  canSetRateLimit: boolean
}

export async function agencyKeyArea(pool: Pool, paths: ConsolePaths, userId: string, agencyId: string): Promise<KeyArea> {
  const id = uuidOrNotFound(agencyId, () => new ApiError('agencyNotFound'))
  const { rows } = await pool.query<{ id: string; name: string; role: Role }>(
    `SELECT a.id, a.name, m.role FROM agencies a
     JOIN agency_memberships m ON m.agency_id = a.id AND m.user_id = $2
     WHERE a.id = $1`,
    [id, userId],
  )
  const row = rows[0]
  if (row === undefined) throw new ApiError('agencyNotFound')
  return {
    owner: { scope: 'AGENCY', agencyId: row.id },
    agency: { id: row.id, name: row.name },
    subAccount: null,
    canManage: managesAgency(row.role),
    keysPath: paths.agencyKeys(row.id),
    auditPath: paths.agencyAudit(row.id),
    usagePath: paths.agencyUsage(row.id),
    canReadAudit: managesAgency(row.role),
    membersPath: row.role === 'owner' ? paths.agencyMembers(row.id) : null,
    webhooksPath: paths.agencyWebhooks(row.id),
    canManageWebhooks: managesAgency(row.role),
    canSetRateLimit: managesAgency(row.role),
  }
}

export async function subAccountKeyArea(pool: Pool, paths: ConsolePaths, userId: string, subAccountId: string): Promise<KeyArea> {
  const id = uuidOrNotFound(subAccountId, () => new ApiError('subAccountNotFound'))
  const { rows } = await pool.query<{ id: string; name: string; agency_id: string; agency_name: string; role: Role | null; member: boolean }>(
    `SELECT s.id, s.name, a.id AS agency_id, a.name AS agency_name, m.role, (sm.user_id IS NOT NULL) AS member
     FROM sub_accounts s
     JOIN agencies a ON a.id = s.agency_id
     LEFT JOIN agency_memberships m ON m.agency_id = a.id AND m.user_id = $2
     LEFT JOIN sub_account_memberships sm ON sm.sub_account_id = s.id AND sm.user_id = $2
     WHERE s.id = $1`,
    [id, userId],
  )
  const row = rows[0]
  // No agency membership, no access: a sub-account membership alone grants nothing.
  if (row === undefined || row.role === null || !(row.member || managesAgency(row.role))) throw new ApiError('subAccountNotFound')
  return {
    owner: { scope: 'SUB-ACCOUNT', subAccountId: row.id },
    agency: { id: row.agency_id, name: row.agency_name },
    subAccount: { id: row.id, name: row.name },
    canManage: true,
    keysPath: paths.subAccountKeys(row.id),
    auditPath: paths.subAccountAudit(row.id),
    usagePath: paths.subAccountUsage(row.id),
    canReadAudit: true,
    membersPath: null,
    webhooksPath: null,
    canManageWebhooks: false,
    canSetRateLimit: managesAgency(row.role),
  }
}

export function requireManage(area: KeyArea): void {
  if (!area.canManage) throw new ApiError('forbidden', 'Only agency owners and admins can create, revoke or delete agency API keys')
}

export function requireAuditReader(area: KeyArea): void {
  if (!area.canReadAudit) throw new ApiError('forbidden', 'Only agency owners and admins can read the agency’s audit trail')
}

export function requireRateLimitSetter(area: KeyArea): void {
  if (!area.canSetRateLimit)
    throw new ApiError('forbidden', 'Only agency owners and admins can change a rate limit: they share out what the agency may send among its sub-accounts')
}

export const WEBHOOK_MANAGERS_ONLY = 'Only agency owners and admins can manage the agency’s webhooks'

/** The webhooks page of an agency area, or 403 for anyone but its owners and admins. */
export function requireWebhookManager(area: KeyArea): string {
  if (area.webhooksPath === null || !area.canManageWebhooks) throw new ApiError('forbidden', WEBHOOK_MANAGERS_ONLY)
  return area.webhooksPath
}

/** The members page of an agency area, or 403 for anyone but its owners. */
export function requireMemberManager(area: KeyArea): string {
  if (area.membersPath === null) throw new ApiError('forbidden', 'Only agency owners can manage the agency’s members')
  return area.membersPath
}

export interface ConsoleHome {
  agencies: Array<{ id: string; name: string; role: Role; subAccounts: Array<{ id: string; name: string }> }>
}

/** The agencies a user belongs to and, in each, the sub-accounts whose keys they may manage. */
export async function consoleHome(pool: Pool, userId: string): Promise<ConsoleHome> {
  const agencies = await pool.query<{ id: string; name: string; role: Role }>(
    `SELECT a.id, a.name, m.role FROM agency_memberships m JOIN agencies a ON a.id = m.agency_id
     WHERE m.user_id = $1 ORDER BY a.name, a.id`,
    [userId],
  )
  const subAccounts = await pool.query<{ id: string; name: string; agency_id: string }>(
    `SELECT s.id, s.name, s.agency_id FROM sub_accounts s
     JOIN agency_memberships m ON m.agency_id = s.agency_id AND m.user_id = $1
     WHERE m.role IN ('owner', 'admin')
        OR EXISTS (SELECT 1 FROM sub_account_memberships sm WHERE sm.sub_account_id = s.id AND sm.user_id = $1)
     ORDER BY s.name, s.id`,
    [userId],
  )
  return {
    agencies: agencies.rows.map((agency) => ({
      ...agency,
      subAccounts: subAccounts.rows.filter((s) => s.agency_id === agency.id).map(({ id, name }) => ({ id, name })),
    })),
  }
}
