/**
 * The console side of the user lifecycle (issue 16): a disabled user's
 * sessions end at once and sign-in is refused like a wrong password, a
 * session is never accepted or made for a disabled user (the second lines
 * behind the disable's own deletion of sessions), a sub-account membership
 * grants nothing without the agency's, and sign-ins are in the audit trail
 * of each of the user's agencies.
 */
import t from 'tap'
import { inTransaction } from '@scoped/shared/db'
import { createSession } from '@scoped/agency-service/console/sessions'
import { SIGN_IN_FAILED_MESSAGE } from '@scoped/agency-service/console/sign-in'
import { UserService } from '@scoped/agency-service/users/user-service'
import { ConsoleClient, createUserWith, createWorld, flushRefusals, signedIn, startConsole } from './console-harness.js'

t.test('disabling a user ends their sessions at once; signing in is refused exactly like a wrong password, and recorded', async (t) => {
  const started = await startConsole(t)
  const { app, pool } = started
  const acme = await createWorld(pool, 'Acme')
  const globex = await createWorld(pool, 'Globex')
  const user = await createUserWith(pool, acme.agencyId, 'admin')
  // Since 015 this insert is recorded too (membership.added, unattributed); the events below are the user's own.
  await pool.query(`INSERT INTO agency_memberships (user_id, agency_id, role) VALUES ($1, $2, 'member')`, [user.id, globex.agencyId])
  const laptop = await signedIn(app, user.email, '192.0.2.1')
  const phone = await signedIn(app, user.email, '2001:db8::7')
  t.equal((await laptop.get('/console')).statusCode, 200)

  const disabled = await new UserService(pool).disable(user.email.toUpperCase(), 'ctl:ops')
  t.same(disabled, { id: user.id, email: user.email, disabled: true })
  for (const [name, client] of [
    ['laptop', laptop],
    ['phone', phone],
  ] as const) {
    const next = await client.get(`/console/agencies/${acme.agencyId}/keys`)
    t.equal(next.statusCode, 303, `${name}: the very next request has no session`)
    t.equal(next.headers.location, '/console/sign-in')
  }
  t.equal((await pool.query(`SELECT 1 FROM console_sessions WHERE user_id = $1`, [user.id])).rowCount, 0, 'the session rows are gone')

  const right = await new ConsoleClient(app, '198.51.100.77').signIn(user.email)
  const wrong = await new ConsoleClient(app, '198.51.100.78').signIn(user.email, 'not the password at all')
  const unknown = await new ConsoleClient(app, '198.51.100.79').signIn('nobody@example.test', 'not the password at all')
  for (const [what, response] of [
    ['the right password', right],
    ['a wrong password', wrong],
    ['an unknown email', unknown],
  ] as const) {
    t.equal(response.statusCode, 401, `${what}: 401`)
    t.match(response.body, SIGN_IN_FAILED_MESSAGE, `${what}: the same message`)
    t.notMatch(response.body, /disabled/i, `${what}: nothing says the account is disabled`)
    t.notOk(
      response.cookies.some((cookie) => cookie.name === '__Secure-sak-console-session' && cookie.value !== ''),
      `${what}: no session`,
    )
  }

  await flushRefusals(started)
  const { rows } = await pool.query<{ type: string; agency_id: string; actor_id: string; role: string; client_address: string; refusals: number | null }>(
    `SELECT type, agency_id, actor_id, role, host(client_address) AS client_address, refusals FROM audit_events
      WHERE user_id = $1 AND type NOT IN ('user.created', 'membership.added') ORDER BY seq, agency_id`,
    [user.id],
  )
  const inBoth = (type: string, actorId: string, address: string | null, refusals: number | null = null) =>
    [
      { type, agency_id: acme.agencyId, actor_id: actorId, role: 'admin', client_address: address, refusals },
      { type, agency_id: globex.agencyId, actor_id: actorId, role: 'member', client_address: address, refusals },
    ].sort((a, b) => (a.agency_id < b.agency_id ? -1 : 1))
  t.same(
    rows,
    [
      ...inBoth('user.signed-in', user.id, '192.0.2.1'),
      ...inBoth('user.signed-in', user.id, '2001:db8::7'),
      ...inBoth('user.disabled', 'ctl:ops', null),
      ...inBoth('user.sign-in-refused', user.id, '198.51.100.78', 2),
    ],
    'each event in the trail of each of the user’s agencies, with the role there and the client address; the two refusals of one minute as one event with their count and the latest address',
  )
})

t.test('second lines: a session that outlived a disable is refused, and none is made for a disabled user', async (t) => {
  const { app, pool, clock } = await startConsole(t)
  const world = await createWorld(pool)
  const member = await signedIn(app, world.member.email)
  // As if a disable had committed without deleting the session (it always does; this is the check behind it).
  await pool.query(`UPDATE users SET disabled_at = now() WHERE id = $1`, [world.member.id])
  t.equal((await member.get('/console')).statusCode, 303, 'the session of a disabled user is not accepted')
  t.equal((await member.get('/console/sign-in')).statusCode, 200, 'the sign-in page does not take it for a session either')
  const made = await inTransaction(pool, (client) => createSession(client, world.member.id, clock.now()))
  t.equal(made, undefined, 'createSession makes none for a disabled user')
  t.equal((await pool.query(`SELECT 1 FROM console_sessions WHERE user_id = $1`, [world.member.id])).rowCount, 1, 'only the old row, never accepted')
})

t.test('a sub-account membership without the agency membership grants nothing', async (t) => {
  const { app, pool } = await startConsole(t)
  const acme = await createWorld(pool, 'Acme')
  const globex = await createWorld(pool, 'Globex')
  // An Acme member who also holds a sub-account membership in Globex, but no Globex membership.
  await pool.query(`INSERT INTO sub_account_memberships (user_id, sub_account_id) VALUES ($1, $2)`, [acme.member.id, globex.subAccountId])
  const member = await signedIn(app, acme.member.email)
  const home = await member.get('/console')
  t.notMatch(home.body, /Globex/, 'not offered on the home page')
  for (const path of [`/console/sub-accounts/${globex.subAccountId}/keys`, `/console/sub-accounts/${globex.subAccountId}/audit`]) {
    const response = await member.get(path)
    t.equal(response.statusCode, 404, `${path}: not found`)
    t.notMatch(response.body, /Globex/, `${path}: says nothing about it`)
  }
  t.equal((await member.get(`/console/sub-accounts/${acme.subAccountId}/keys`)).statusCode, 200, 'with both memberships it works')

  // Losing the agency membership (however it went) ends the sub-account access with it.
  await pool.query(`DELETE FROM agency_memberships WHERE user_id = $1`, [acme.member.id])
  t.equal((await member.get(`/console/sub-accounts/${acme.subAccountId}/keys`)).statusCode, 404, 'the sub-account membership alone is not enough')
})
