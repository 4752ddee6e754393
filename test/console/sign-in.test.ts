import t from 'tap'
import { createHash } from 'node:crypto'
import { SESSION_IDLE_TIMEOUT_MS, SESSION_LIFETIME_MS } from '@scoped/agency-service/console/sessions'
import { ConsoleClient, createWorld, csrfToken, PASSWORD, signedIn, startConsole } from './console-harness.js'

const SESSION_COOKIE = '__Secure-sak-console-session'

function setCookies(headers: Record<string, unknown>): string[] {
  const value = headers['set-cookie']
  return value === undefined ? [] : Array.isArray(value) ? value.map(String) : [String(value)]
}

t.test('signing in with the right password starts a server-side session with a hardened cookie', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const client = new ConsoleClient(app)

  const form = await client.get('/console/sign-in')
  t.equal(form.statusCode, 200)
  t.match(form.body, /<label for="email">Email<\/label>/)
  t.match(form.body, /<label for="password">Password<\/label>/)

  const response = await client.post('/console/sign-in', { csrf: csrfToken(form.body), email: world.owner.email.toUpperCase(), password: PASSWORD })
  t.equal(response.statusCode, 303)
  t.equal(response.headers.location, '/console')

  const cookie = setCookies(response.headers).find((line) => line.startsWith(`${SESSION_COOKIE}=`))
  t.ok(cookie, 'a session cookie is set')
  t.match(cookie!, /; Secure/)
  t.match(cookie!, /; HttpOnly/)
  t.match(cookie!, /; SameSite=Strict/)
  t.match(cookie!, /; Path=\/console(;|$)/)
  t.notMatch(cookie!, /Domain=/i, 'host-only')

  const token = client.jar.get(SESSION_COOKIE)!.value
  const { rows } = await pool.query<{ token_hash: string; user_id: string }>('SELECT token_hash, user_id FROM console_sessions')
  t.same(rows, [{ token_hash: createHash('sha256').update(token).digest('hex'), user_id: world.owner.id }], 'only the hash of the token is stored')
  const stored = JSON.stringify((await pool.query('SELECT * FROM console_sessions')).rows)
  t.notOk(stored.includes(token), 'the token itself appears nowhere in the table')

  const home = await client.get('/console')
  t.equal(home.statusCode, 200)
  t.match(home.body, `Signed in as <strong>${world.owner.email}</strong>`)
  t.match(home.body, 'Acme')
})

t.test('a wrong password or an unknown email is refused with the same message and no session', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)

  for (const [what, email, password] of [
    ['wrong password', world.owner.email, 'not the password at all'],
    ['unknown email', 'nobody@example.test', PASSWORD],
    ['empty password', world.owner.email, ''],
  ] as const) {
    const client = new ConsoleClient(app)
    const response = await client.signIn(email, password)
    t.equal(response.statusCode, 401, what)
    t.match(response.body, 'The email or password is incorrect.', what)
    t.match(response.body, /role="alert"/, `${what}: the error is on the page, announced`)
    t.notOk(client.jar.has(SESSION_COOKIE), `${what}: no session cookie`)
  }
  t.equal((await pool.query('SELECT 1 FROM console_sessions')).rowCount, 0)
})

t.test('the sign-in form is protected against cross-site posts (login CSRF)', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)

  const missing = new ConsoleClient(app)
  await missing.get('/console/sign-in')
  const noToken = await missing.post('/console/sign-in', { email: world.owner.email, password: PASSWORD })
  t.equal(noToken.statusCode, 403, 'no token in the form')

  const noCookie = new ConsoleClient(app)
  const page = await noCookie.get('/console/sign-in')
  noCookie.jar.clear()
  t.equal(
    (await noCookie.post('/console/sign-in', { csrf: csrfToken(page.body), email: world.owner.email, password: PASSWORD })).statusCode,
    403,
    'no sign-in cookie',
  )

  const crossSite = new ConsoleClient(app)
  const form = await crossSite.get('/console/sign-in')
  const refused = await crossSite.post(
    '/console/sign-in',
    { csrf: csrfToken(form.body), email: world.owner.email, password: PASSWORD },
    { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' },
  )
  t.equal(refused.statusCode, 403, 'a post from another site')
  t.notOk(crossSite.jar.has(SESSION_COOKIE))
  t.equal((await pool.query('SELECT 1 FROM console_sessions')).rowCount, 0)
})

t.test('pages need a session: without one the browser is sent to sign in and nothing happens', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const anonymous = new ConsoleClient(app)
  for (const path of ['/console', `/console/agencies/${world.agencyId}/keys`, `/console/sub-accounts/${world.subAccountId}/keys`]) {
    const response = await anonymous.get(path)
    t.equal(response.statusCode, 303, path)
    t.equal(response.headers.location, '/console/sign-in', path)
  }
  const post = await anonymous.post(`/console/agencies/${world.agencyId}/keys`, { csrf: 'x'.repeat(43), name: 'sneaky' })
  t.equal(post.statusCode, 303)
  t.equal((await pool.query('SELECT 1 FROM api_keys')).rowCount, 0, 'no key was created')

  const forged = new ConsoleClient(app)
  forged.jar.set(SESSION_COOKIE, { value: 'A'.repeat(43), path: '/console' })
  t.equal((await forged.get('/console')).statusCode, 303, 'an invented token is no session')
})

t.test('signing out deletes the session: the old cookie no longer works', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const client = await signedIn(app, world.owner.email)
  const oldCookie = client.jar.get(SESSION_COOKIE)!

  const home = await client.get('/console')
  const noToken = await client.post('/console/sign-out', {})
  t.equal(noToken.statusCode, 403, 'sign-out without the CSRF token is refused')
  t.equal((await client.get('/console')).statusCode, 200, 'and the session still works')

  const out = await client.post('/console/sign-out', { csrf: csrfToken(home.body) })
  t.equal(out.statusCode, 303)
  t.equal(out.headers.location, '/console/sign-in')
  t.notOk(client.jar.has(SESSION_COOKIE), 'the cookie is cleared')
  t.equal((await pool.query('SELECT 1 FROM console_sessions')).rowCount, 0, 'the session row is gone')

  const replay = new ConsoleClient(app)
  replay.jar.set(SESSION_COOKIE, oldCookie)
  const response = await replay.get(`/console/agencies/${world.agencyId}/keys`)
  t.equal(response.statusCode, 303, 'the old cookie is worthless')
  t.equal(response.headers.location, '/console/sign-in')
})

t.test('sessions end after the idle timeout and after their lifetime', async (t) => {
  const { app, pool, clock } = await startConsole(t)
  const world = await createWorld(pool)

  const idle = await signedIn(app, world.owner.email)
  clock.advance(SESSION_IDLE_TIMEOUT_MS - 1000)
  t.equal((await idle.get('/console')).statusCode, 200, 'used just before the idle timeout')
  clock.advance(SESSION_IDLE_TIMEOUT_MS - 1000)
  t.equal((await idle.get('/console')).statusCode, 200, 'each use renews the idle deadline')
  clock.advance(SESSION_IDLE_TIMEOUT_MS + 1000)
  t.equal((await idle.get('/console')).statusCode, 303, 'idle too long')

  const busy = await signedIn(app, world.owner.email)
  for (let elapsed = 0; elapsed < SESSION_LIFETIME_MS; elapsed += SESSION_IDLE_TIMEOUT_MS / 2) {
    clock.advance(SESSION_IDLE_TIMEOUT_MS / 2)
    await busy.get('/console')
  }
  t.equal((await busy.get('/console')).statusCode, 303, 'past its lifetime, however busy')
})

t.test('signing in again replaces the earlier session', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const client = await signedIn(app, world.owner.email)
  const first = client.jar.get(SESSION_COOKIE)!
  const again = await client.get('/console/sign-in')
  t.equal(again.statusCode, 303, 'a signed-in user is sent to the console')

  // The same browser signs in as someone else (its old session cookie still present).
  const other = new ConsoleClient(app)
  const form = await other.get('/console/sign-in')
  other.jar.set(SESSION_COOKIE, first)
  t.equal((await other.post('/console/sign-in', { csrf: csrfToken(form.body), email: world.admin.email, password: PASSWORD })).statusCode, 303)
  t.not(other.jar.get(SESSION_COOKIE)!.value, first.value, 'a new token, never the one the browser had')
  t.equal((await client.get('/console')).statusCode, 303, 'the earlier session is gone')
})
