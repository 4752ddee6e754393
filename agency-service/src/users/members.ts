/**
 * An agency's members as its owners see them on the members page: every user
 * with a membership of the agency, their role, whether the account is
 * disabled, the agency's sub-accounts they belong to, and whether they belong
 * to another agency too (which agency is not said: that is the other
 * agency's business; it decides only whether this one may disable the account).
 */
import type { Pool } from '@scoped/shared/db'
import type { Role } from './roles.js'

export interface AgencyMember {
  id: string
  email: string
  role: Role
  disabled: boolean
  /** The agency's sub-accounts the user is a member of, by name. */
  subAccounts: Array<{ id: string; name: string }>
  inOtherAgencies: boolean
}

interface MemberRow {
  id: string
  email: string
  role: Role
  disabled: boolean
  in_other_agencies: boolean
  sub_accounts: Array<{ id: string; name: string }>
}

const MEMBERS_SQL = `
  SELECT u.id, u.email, m.role, u.disabled_at IS NOT NULL AS disabled,
         EXISTS (SELECT 1 FROM agency_memberships o WHERE o.user_id = u.id AND o.agency_id <> m.agency_id) AS in_other_agencies,
         coalesce((SELECT json_agg(json_build_object('id', s.id, 'name', s.name) ORDER BY s.name, s.id)
                     FROM sub_account_memberships sm JOIN sub_accounts s ON s.id = sm.sub_account_id
                    WHERE sm.user_id = u.id AND s.agency_id = m.agency_id), '[]'::json) AS sub_accounts
    FROM agency_memberships m JOIN users u ON u.id = m.user_id
   WHERE m.agency_id = $1`

function toMember(row: MemberRow): AgencyMember {
  return { id: row.id, email: row.email, role: row.role, disabled: row.disabled, subAccounts: row.sub_accounts, inOtherAgencies: row.in_other_agencies }
}

const ROLE_ORDER = "CASE m.role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 ELSE 2 END"

/** The agency's members, read over the pool (a store like MembershipService and UserService). */
export class MemberStore {
  constructor(private readonly pool: Pool) {}

  /** Every member of the agency: owners first, then admins, then members, each by email. */
  async list(agencyId: string): Promise<AgencyMember[]> {
    const { rows } = await this.pool.query<MemberRow>(`${MEMBERS_SQL} ORDER BY ${ROLE_ORDER}, u.email`, [agencyId])
    return rows.map(toMember)
  }

  /** One member of the agency, or undefined when the user is not one (or does not exist). */
  async find(agencyId: string, userId: string): Promise<AgencyMember | undefined> {
    const { rows } = await this.pool.query<MemberRow>(`${MEMBERS_SQL} AND u.id = $2`, [agencyId, userId])
    const row = rows[0]
    return row === undefined ? undefined : toMember(row)
  }
}
