/**
 * `ctl db grant-login --role R --user U`: makes (or re-keys) the login a
 * service connects as, a member of one of the NOLOGIN group roles of
 * migration 006. Run it as the migrating role (it needs CREATEROLE). The
 * password comes from standard input, never an argument, and reaches the
 * server only as a SCRAM-SHA-256 verifier computed here, so it is in no
 * statement the server could log.
 *
 * It refuses to touch a role that is anything more than a service login: a
 * superuser, a role with CREATEROLE, CREATEDB, REPLICATION or BYPASSRLS, a
 * member of any other role, or an owner of a database, schema or table.
 */
import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto'
import type { Pool } from '@scoped/shared/db'
import { inTransaction } from '@scoped/shared/db'
import { ApiError, invalidField } from '@scoped/shared/errors'

export const SERVICE_ROLES = ['scoped_gateway', 'scoped_resource', 'scoped_agency'] as const
export type ServiceRole = (typeof SERVICE_ROLES)[number]

export function isServiceRole(value: unknown): value is ServiceRole {
  return typeof value === 'string' && (SERVICE_ROLES as readonly string[]).includes(value)
}

const LOGIN_NAME = /^[a-z_][a-z0-9_]{0,62}$/
/** A machine credential: printable ASCII (so every client library computes the same SCRAM proof), long enough not to be guessed. */
const LOGIN_PASSWORD = /^[\x21-\x7e]{16,1024}$/
const SCRAM_ITERATIONS = 4096

/** The verifier Postgres stores for `password` (RFC 5802 / 7677), as `ALTER ROLE … PASSWORD` accepts it. */
export function scramSha256Verifier(password: string, salt: Buffer = randomBytes(16), iterations = SCRAM_ITERATIONS): string {
  const salted = pbkdf2Sync(Buffer.from(password, 'utf8'), salt, iterations, 32, 'sha256')
  const clientKey = createHmac('sha256', salted).update('Client Key').digest()
  const storedKey = createHash('sha256').update(clientKey).digest()
  const serverKey = createHmac('sha256', salted).update('Server Key').digest()
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`
}

export interface GrantLogin {
  role: unknown
  user: unknown
  password: string
}

export interface GrantedLogin {
  user: string
  role: ServiceRole
  created: boolean
}

interface ExistingRole {
  oid: number
  privileged: boolean
  memberOf: string[]
  owns: boolean
}

export async function grantLogin(pool: Pool, input: GrantLogin): Promise<GrantedLogin> {
  if (!isServiceRole(input.role)) throw invalidField({ name: 'role', label: '--role' }, `must be one of ${SERVICE_ROLES.join(', ')}`)
  const role = input.role
  if (typeof input.user !== 'string' || !LOGIN_NAME.test(input.user) || input.user.startsWith('pg_') || isServiceRole(input.user)) {
    throw invalidField({ name: 'user', label: '--user' }, 'must be a lower-case role name (letters, digits, _; not pg_… nor a group role)')
  }
  const user = input.user
  if (!LOGIN_PASSWORD.test(input.password)) {
    throw invalidField(
      { name: 'password', label: 'the password' },
      'must be 16 to 1024 printable ASCII characters without spaces (openssl rand -hex 32 makes one)',
    )
  }
  const verifier = scramSha256Verifier(input.password)
  return inTransaction(pool, async (client) => {
    const { rows } = await client.query<ExistingRole>(
      `SELECT r.oid::int AS oid,
              (r.rolsuper OR r.rolcreaterole OR r.rolcreatedb OR r.rolreplication OR r.rolbypassrls) AS privileged,
              ARRAY(SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid WHERE m.member = r.oid ORDER BY 1)::text[] AS "memberOf",
              (EXISTS (SELECT FROM pg_class WHERE relowner = r.oid) OR EXISTS (SELECT FROM pg_namespace WHERE nspowner = r.oid)
                OR EXISTS (SELECT FROM pg_database WHERE datdba = r.oid)) AS owns
         FROM pg_roles r WHERE r.rolname = $1`,
      [user],
    )
    const existing = rows[0]
    const name = client.escapeIdentifier(user)
    const password = client.escapeLiteral(verifier)
    if (existing === undefined) {
      await client.query(`CREATE ROLE ${name} LOGIN INHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD ${password}`)
      await client.query(`GRANT ${client.escapeIdentifier(role)} TO ${name}`)
      return { user, role, created: true }
    }
    if (existing.privileged || existing.owns || existing.memberOf.some((group) => group !== role)) {
      throw new ApiError(
        'conflict',
        `role ${user} exists and is more than a ${role} login (privileged, an owner, or a member of other roles): choose another --user`,
      )
    }
    await client.query(`ALTER ROLE ${name} LOGIN INHERIT PASSWORD ${password}`)
    if (!existing.memberOf.includes(role)) await client.query(`GRANT ${client.escapeIdentifier(role)} TO ${name}`)
    return { user, role, created: false }
  })
}
