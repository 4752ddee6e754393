/**
 * The user lifecycle (migration 008) as agency-service's least-privilege
 * login (scoped_agency): creating a user, making a session (which
 * share-locks the user row), resetting a password, removing memberships and
 * disabling (which locks the row and deletes sessions) all go through, with
 * their audit events; the trail still only grows.
 */
import t from 'tap'
import { createPool, inTransaction } from '@scoped/shared/db'
import { createSession } from '@scoped/agency-service/console/sessions'
import { TenantStore } from '@scoped/agency-service/tenants'
import { MembershipService } from '@scoped/agency-service/users/memberships'
import { UserService } from '@scoped/agency-service/users/user-service'
import { createTestDatabase } from '../helpers/database.js'
import { createServiceLogin } from '../helpers/database-roles.js'

t.test('scoped_agency runs the whole user lifecycle', async (t) => {
  const db = await createTestDatabase(t)
  const login = await createServiceLogin(t, db, 'scoped_agency')
  const pool = createPool(login.url, { max: 2, applicationName: 'scoped-api-test' })
  t.teardown(() => pool.end())

  const tenants = new TenantStore(pool)
  const agency = await tenants.createAgency('Least')
  const sub = await tenants.createSubAccount(agency.id, 'Least West', 'ctl:ops')
  const user = await tenants.createUser(
    { email: 'eve@example.test', password: 'a long and private passphrase', agencyId: agency.id, role: 'admin', subAccountId: sub.id },
    'ctl:ops',
  )
  const session = await inTransaction(pool, (client) => createSession(client, user.id, new Date()))
  t.ok(session, 'a session is made')

  const users = new UserService(pool)
  await users.setPassword(user, 'another long and private passphrase', 'ctl:ops')
  t.same(await new MembershipService(pool).remove(user.email, { subAccountId: sub.id }, 'ctl:ops'), { ...user, removed: true })
  t.same(await users.disable(user.email, 'ctl:ops'), { ...user, disabled: true })
  t.same(await new MembershipService(pool).remove(user.email, { agencyId: agency.id }, 'ctl:ops'), { ...user, removed: true })

  const { rows } = await db.pool.query<{ type: string }>(`SELECT type FROM audit_events WHERE user_id = $1 ORDER BY seq`, [user.id])
  t.same(
    rows.map((row) => row.type),
    // The session made above is a sign-in: since 015 a new session row writes user.signed-in itself.
    ['user.created', 'user.signed-in', 'user.password-changed', 'membership.removed', 'user.disabled', 'membership.removed'],
  )
  t.equal((await db.pool.query(`SELECT 1 FROM console_sessions WHERE user_id = $1`, [user.id])).rowCount, 0, 'the sessions went')
  await t.rejects(pool.query(`DELETE FROM audit_events WHERE user_id = $1`, [user.id]), { code: '42501' }, 'the trail still only grows')
})
