/**
 * Every signed-in user changes their own password (issue 16): the current
 * password is required, the new one meets the rules of `ctl user create`,
 * wrong guesses are throttled like failed sign-ins, every session of the user
 * ends and this browser gets a new one, and the change is in the audit trail.
 */
import t from 'tap'
import { SESSION_COOKIE } from '@scoped/agency-service/console/cookies'
import { MAX_FAILURES_PER_EMAIL_AND_CLIENT } from '@scoped/agency-service/console/sign-in-throttle'
import { ConsoleClient, createUserWith, createWorld, csrfToken, formTokenOf, PASSWORD, signedIn, startConsole } from './console-harness.js'

const FORM = '/console/account/password'
const NEW_PASSWORD = 'an entirely different passphrase'

t.test('the form: current password, the new one twice, each refusal beside its field, nothing changed', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const member = await signedIn(app, world.member.email)
  const home = await member.get('/console')
  t.match(home.body, `<a href="${FORM}">Your password</a>`, 'every page links to it')
  const page = await member.get(FORM)
  t.equal(page.statusCode, 200)
  t.match(page.body, '<h1>Your password</h1>')
  t.match(page.body, '<input type="password" id="currentPassword" name="currentPassword" autocomplete="current-password"')
  t.match(page.body, '<input type="password" id="newPassword" name="newPassword" autocomplete="new-password"')
  t.match(page.body, 'id="newPasswordAgain"')
  const token = csrfToken(page.body)

  const refusals: Array<[string, Record<string, string>, string, string]> = [
    [
      'the two new ones differ',
      { currentPassword: PASSWORD, newPassword: NEW_PASSWORD, newPasswordAgain: `${NEW_PASSWORD}!` },
      'newPasswordAgain',
      'The two new passwords differ.',
    ],
    ['too short', { currentPassword: PASSWORD, newPassword: 'short', newPasswordAgain: 'short' }, 'newPassword', 'Password must be at least 10 characters.'],
    [
      'a common password',
      { currentPassword: PASSWORD, newPassword: 'password123', newPasswordAgain: 'password123' },
      'newPassword',
      'one of the most common passwords',
    ],
    [
      'a wrong current password',
      { currentPassword: 'not the password', newPassword: NEW_PASSWORD, newPasswordAgain: NEW_PASSWORD },
      'currentPassword',
      'The current password is incorrect.',
    ],
  ]
  for (const [what, form, field, message] of refusals) {
    const response = await member.post(FORM, { csrf: token, ...form })
    t.equal(response.statusCode, 400, what)
    t.match(response.body, `<p class="field-error" id="${field}-error" role="alert">`, `${what}: beside ${field}`)
    t.match(response.body, message, what)
    t.match(response.body, new RegExp(`id="${field}"[^>]*aria-invalid="true"`), `${what}: ${field} marked invalid`)
  }
  t.equal(
    (await member.post(FORM, { currentPassword: PASSWORD, newPassword: NEW_PASSWORD, newPasswordAgain: NEW_PASSWORD })).statusCode,
    403,
    'not without CSRF',
  )
  t.equal((await new ConsoleClient(app).signIn(world.member.email, PASSWORD)).statusCode, 303, 'the password is unchanged')
  t.equal((await pool.query(`SELECT 1 FROM audit_events WHERE type = 'user.password-changed'`)).rowCount, 0, 'and nothing recorded')
})

t.test('a change gives this browser a new session, ends every other, and only the new password signs in', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const here = await signedIn(app, world.member.email, '192.0.2.44')
  const elsewhere = await signedIn(app, world.member.email, '198.51.100.9')
  const token = csrfToken((await here.get(FORM)).body)
  const before = here.jar.get(SESSION_COOKIE)?.value

  const changed = await here.post(FORM, { csrf: token, currentPassword: PASSWORD, newPassword: NEW_PASSWORD, newPasswordAgain: NEW_PASSWORD })
  t.equal(changed.statusCode, 303)
  t.equal(changed.headers.location, `${FORM}?notice=changed`)
  t.match((await here.get(String(changed.headers.location))).body, 'Your password was changed. Your other sessions have ended.')
  t.equal((await here.get('/console')).statusCode, 200, 'this browser stays signed in')
  t.not(here.jar.get(SESSION_COOKIE)?.value, before, 'with a new session token')
  const stale = new ConsoleClient(app, '192.0.2.44')
  stale.jar.set(SESSION_COOKIE, { value: before!, path: '/console' })
  t.equal((await stale.get('/console')).statusCode, 303, 'the token from before the change is signed out')
  t.equal((await elsewhere.get('/console')).statusCode, 303, 'the other one ended at once')
  t.equal((await new ConsoleClient(app).signIn(world.member.email, PASSWORD)).statusCode, 401, 'the old password is refused')
  t.equal((await new ConsoleClient(app).signIn(world.member.email, NEW_PASSWORD)).statusCode, 303, 'the new one signs in')

  const { rows } = await pool.query(
    `SELECT type, actor_kind, actor_id, user_id, role, host(client_address) AS client_address FROM audit_events
      WHERE agency_id = $1 AND type = 'user.password-changed'`,
    [world.agencyId],
  )
  t.same(rows, [
    {
      type: 'user.password-changed',
      actor_kind: 'user',
      actor_id: world.member.id,
      user_id: world.member.id,
      role: 'member',
      client_address: '192.0.2.44',
    },
  ])
})

t.test(`wrong current passwords count like failed sign-ins: after ${MAX_FAILURES_PER_EMAIL_AND_CLIENT}, 429`, async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const user = await createUserWith(pool, world.agencyId, 'member')
  const session = await signedIn(app, user.email)
  const token = csrfToken((await session.get(FORM)).body)
  const guess = (currentPassword: string) => session.post(FORM, { csrf: token, currentPassword, newPassword: NEW_PASSWORD, newPasswordAgain: NEW_PASSWORD })
  for (let i = 0; i < MAX_FAILURES_PER_EMAIL_AND_CLIENT; i++) t.equal((await guess(`guess number ${i}`)).statusCode, 400, `guess ${i + 1}`)
  const throttled = await guess(PASSWORD)
  t.equal(throttled.statusCode, 429, 'then even the right one is held back')
  t.ok(Number(throttled.headers['retry-after']) > 0, 'with Retry-After')
  t.equal((await new ConsoleClient(app, '203.0.113.10').signIn(user.email)).statusCode, 429, 'and so is signing in from that client, as the same allowance')
  t.equal(
    (await new ConsoleClient(app, '192.0.2.200').signIn(user.email)).statusCode,
    303,
    'from elsewhere the account still signs in, with its password unchanged',
  )
})

t.test('the form is sent once: a double post changes the password once and counts no wrong password; a later repeat is sent to sign in', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const user = await createUserWith(pool, world.agencyId, 'member')
  const here = await signedIn(app, user.email, '192.0.2.45')
  const page = (await here.get(FORM)).body
  const form = { csrf: csrfToken(page), formToken: formTokenOf(page)!, currentPassword: PASSWORD, newPassword: NEW_PASSWORD, newPasswordAgain: NEW_PASSWORD }
  const before = here.jar.get(SESSION_COOKIE)!.value
  // Two clients with the same cookie: a browser that sent the form twice before the first answer came.
  const again = new ConsoleClient(app, '192.0.2.45')
  again.jar.set(SESSION_COOKIE, { value: before, path: '/console' })
  const [first, second] = await Promise.all([here.post(FORM, form), again.post(FORM, form)])
  // One of the two does the change. The other waits for its answer; the change ends the session both came with, and
  // the claim of the form with it, so the other is answered as any request of an ended session: sent to sign in. Not
  // a 500, and not a "wrong current password" counted against the user, as checking it again would give.
  const locations = [first, second].map((answer) => `${answer.statusCode} ${String(answer.headers.location)}`).sort()
  t.same(locations, [`303 ${FORM}?notice=changed`, '303 /console/sign-in'], 'one post changes it, the other is sent to sign in')
  t.equal((await pool.query(`SELECT 1 FROM audit_events WHERE type = 'user.password-changed' AND user_id = $1`, [user.id])).rowCount, 1, 'one change recorded')
  const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM console_sign_in_failures')
  t.equal(rows[0]!.n, 0, 'and no failed attempt counted against the user')

  const later = new ConsoleClient(app, '192.0.2.45')
  later.jar.set(SESSION_COOKIE, { value: before, path: '/console' })
  const repeat = await later.post(FORM, form)
  t.equal(repeat.statusCode, 303, 'the same form sent again later, with the session the change ended')
  t.match(String(repeat.headers.location), /\/console\/sign-in/, 'is sent to sign in')
  t.equal((await new ConsoleClient(app).signIn(user.email, NEW_PASSWORD)).statusCode, 303, 'where the new password signs in')
})
