/**
 * Issue 34, finding 1 (in-process, over a real Postgres): a console form is
 * submitted once whatever the browser does. Two submissions of the same form
 * token at the same moment, or later, or through another agency-service
 * replica, make exactly one change and both get the first one's answer: for
 * create and roll the same redirect to the same one-time display, which shows
 * the key once. A refused form is judged again; a token answers only its own
 * form. Also findings 2, 3 and 5 as the server sees them: the reveal page's
 * expiry ("never" included), the roll page's lifetime, the allowlist warning.
 */
import t from 'tap'
import type { LightMyRequestResponse } from 'fastify'
import { hashKey } from '@scoped/shared/keys'
import { buildConsoleApp, ConsoleClient, createKeyThroughConsole, createWorld, csrfToken, formTokenOf, signedIn, startConsole } from './console-harness.js'

function plaintextOf(page: LightMyRequestResponse): string | undefined {
  return /id="new-key" readonly value="([^"]+)"/.exec(page.body)?.[1]
}

function revealCookieOf(response: LightMyRequestResponse): string | undefined {
  return response.cookies.find((cookie) => cookie.name === '__Secure-sak-console-reveal')?.value
}

t.test('two creates with one form token at the same moment: one key, both answered with the same one-time display', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const keysPath = `/console/agencies/${world.agencyId}/keys`
  const page = await owner.get(keysPath)
  const form = { csrf: csrfToken(page.body), formToken: formTokenOf(page.body)!, name: 'billing sync', expires: 'never', expiresOn: '', allowedCidrs: '' }

  const [first, second] = await Promise.all([owner.post(keysPath, form), owner.post(keysPath, form)])
  t.equal(first.statusCode, 303)
  t.equal(second.statusCode, 303)
  t.equal(first.headers.location, second.headers.location, 'the same redirect')
  t.equal(revealCookieOf(first), revealCookieOf(second), 'with the same cookie for the one-time display')
  const { rows } = await pool.query<{ id: string; key_hash: string }>(`SELECT id, key_hash FROM api_keys`)
  t.equal(rows.length, 1, 'exactly one key was made')

  const reveal = await owner.get(String(second.headers.location))
  const plaintext = plaintextOf(reveal)
  t.equal(reveal.statusCode, 200)
  t.equal(hashKey(plaintext!), rows[0]!.key_hash, 'the page shows the key that was made')
  t.match(reveal.body, '<p id="new-key-expiry">This key never expires.</p>', 'the expiry is repeated, "never" included')
  const reload = await owner.get(String(second.headers.location))
  t.equal(reload.statusCode, 410, 'shown once: a reload says it cannot be shown again')

  const later = await owner.post(keysPath, form)
  t.equal(later.headers.location, first.headers.location, 'a later repeat of the form gets the first answer too')
  const afterRepeat = await owner.get(String(later.headers.location))
  t.equal(afterRepeat.statusCode, 410, 'which no longer shows the key')
  t.notOk(afterRepeat.body.includes(plaintext!))
  t.equal((await pool.query(`SELECT 1 FROM api_keys`)).rowCount, 1, 'and makes no key')
  const stored = await pool.query<{ sealed_key: Buffer | null; outcome: unknown }>(`SELECT sealed_key, outcome FROM console_form_submissions`)
  t.same(stored.rows, [{ sealed_key: null, outcome: { location: first.headers.location, reveal: true } }], 'nothing of the key is kept once shown')
})

t.test('a repeated create through another replica, while the first is still at work, waits for its answer', async (t) => {
  const { app, pool } = await startConsole(t)
  const other = await buildConsoleApp(pool)
  t.teardown(() => other.app.close())
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const elsewhere = new ConsoleClient(other.app)
  for (const [name, cookie] of owner.jar) elsewhere.jar.set(name, cookie)
  const keysPath = `/console/sub-accounts/${world.subAccountId}/keys`
  const page = await owner.get(keysPath)
  const form = { csrf: csrfToken(page.body), formToken: formTokenOf(page.body)!, name: 'crm import', expires: '30d', allowedCidrs: '' }

  // The first submission's key creation is held up by a lock on the sub-account, so the second surely arrives while it is at work.
  const blocker = await pool.connect()
  await blocker.query('BEGIN')
  await blocker.query(`SELECT 1 FROM sub_accounts WHERE id = $1 FOR UPDATE`, [world.subAccountId])
  const first = owner.post(keysPath, form)
  await waitFor(async () => (await pool.query(`SELECT 1 FROM console_form_submissions`)).rowCount === 1)
  const second = elsewhere.post(keysPath, form)
  await blocker.query('COMMIT')
  blocker.release()
  const [a, b] = await Promise.all([first, second])
  t.equal(a.statusCode, 303)
  t.equal(b.statusCode, 303)
  t.equal(a.headers.location, b.headers.location)
  t.equal((await pool.query(`SELECT 1 FROM api_keys`)).rowCount, 1, 'one key')
  const reveal = await elsewhere.get(String(b.headers.location))
  t.equal(reveal.statusCode, 200, 'the other replica shows it')
  t.match(reveal.body, /<p id="new-key-expiry">This key expires at <time datetime="[^"]+">/)
})

t.test('two rolls with one form token: one new key, the same display for both; the old key keeps its grace', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const keysPath = `/console/agencies/${world.agencyId}/keys`
  await createKeyThroughConsole(owner, keysPath, 'nightly export')
  const oldId = (await pool.query<{ id: string }>(`SELECT id FROM api_keys`)).rows[0]!.id
  const rollPath = `${keysPath}/${oldId}/roll`
  const page = await owner.get(rollPath)
  t.match(
    page.body,
    '<p id="roll-lifetime"><strong>The new key does not expire</strong>, like this one.</p>',
    'the roll page says what lifetime the new key gets',
  )
  const form = { csrf: csrfToken(page.body), formToken: formTokenOf(page.body)!, grace: '3600' }

  const [first, second] = await Promise.all([owner.post(rollPath, form), owner.post(rollPath, form)])
  t.equal(first.statusCode, 303)
  t.equal(second.statusCode, 303, 'not "This key was already rolled"')
  t.equal(first.headers.location, second.headers.location)
  const successors = await pool.query<{ id: string }>(`SELECT id FROM api_keys WHERE replaces = $1`, [oldId])
  t.equal(successors.rowCount, 1, 'exactly one new key')
  t.equal(first.headers.location, `${keysPath}/${successors.rows[0]!.id}/created`)
  const reveal = await owner.get(String(second.headers.location))
  t.ok(plaintextOf(reveal), 'the new key is shown')
  t.match(reveal.body, 'This key replaces “nightly export”')
})

t.test('the roll page says the new key keeps the old key’s lifetime, and it does', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const keysPath = `/console/sub-accounts/${world.subAccountId}/keys`
  const created = await owner.submit(keysPath, keysPath, { name: 'quarterly', expires: '90d' })
  const oldId = /\/keys\/([0-9a-f-]{36})\/created/.exec(String(created.headers.location))![1]!
  const page = await owner.get(`${keysPath}/${oldId}/roll`)
  t.match(page.body, '<strong>The new key expires 90 days after the roll</strong>: this key was made to last 90 days, and the new one keeps that lifetime.')
  const before = Date.now()
  const rolled = await owner.submit(`${keysPath}/${oldId}/roll`, `${keysPath}/${oldId}/roll`, { grace: '0' })
  t.equal(rolled.statusCode, 303)
  const { rows } = await pool.query<{ expires_at: Date }>(`SELECT expires_at FROM api_keys WHERE replaces = $1`, [oldId])
  t.ok(Math.abs(rows[0]!.expires_at.getTime() - (before + 90 * 86_400_000)) < 60_000, 'the new key expires 90 days from the roll')
  t.match((await owner.get(String(rolled.headers.location))).body, /This key expires at <time/)
})

t.test('revoke, delete, addresses and rate limit: a repeated submission gets the first answer; a refusal is judged again', async (t) => {
  const { app, pool, keys } = await startConsole(t)
  const world = await createWorld(pool)
  const admin = await signedIn(app, world.admin.email)
  const keysPath = `/console/sub-accounts/${world.subAccountId}/keys`
  const owner = { scope: 'SUB-ACCOUNT' as const, subAccountId: world.subAccountId }
  const key = await keys.create(owner, 'office', 'test')

  for (const [page, fields] of [
    [`${keysPath}/${key.id}/addresses`, { allowedCidrs: '192.0.2.0/24' }],
    [`${keysPath}/${key.id}/rate-limit`, { action: 'set', rate: '5', burst: '10' }],
    [`${keysPath}/${key.id}/revoke`, {}],
  ] as const) {
    const shown = await admin.get(page)
    const form = { csrf: csrfToken(shown.body), formToken: formTokenOf(shown.body)!, ...fields }
    const [first, second] = await Promise.all([admin.post(page, form), admin.post(page, form)])
    t.equal(first.statusCode, 303, page)
    t.same([second.statusCode, second.headers.location], [303, first.headers.location], `${page}: the same answer`)
  }
  const events = await pool.query<{ type: string }>(`SELECT type FROM audit_events WHERE key_id = $1 ORDER BY at`, [key.id])
  t.same(
    events.rows.map((row) => row.type),
    ['key.created', 'key.updated', 'key.updated', 'key.revoked'],
    'each change made once',
  )

  const other = await keys.create(owner, 'other', 'test')
  const shown = await admin.get(`${keysPath}/${other.id}/addresses`)
  const token = formTokenOf(shown.body)!
  const bad = { csrf: csrfToken(shown.body), formToken: token, allowedCidrs: 'nope\n10.1.2.3/8\n192.0.2.0/24' }
  const refused = await admin.post(`${keysPath}/${other.id}/addresses`, bad)
  t.equal(refused.statusCode, 400)
  t.match(refused.body, '<title>Error: Allowed addresses', 'the title says there is an error')
  t.match(refused.body, '<li>Line 1: &quot;nope&quot; is not an IP address or CIDR block</li>', 'one message per bad line')
  t.match(refused.body, '<li>Line 2: &quot;10.1.2.3/8&quot; has bits set after its prefix length; the block is 10.0.0.0/8</li>')
  t.match(refused.body, /<textarea id="key-cidrs"[^>]* aria-describedby="key-cidrs-hint key-cidrs-error" aria-invalid="true">/)
  const corrected = await admin.post(`${keysPath}/${other.id}/addresses`, { ...bad, allowedCidrs: '192.0.2.0/24' })
  t.equal(corrected.statusCode, 303, 'the same token, corrected, is judged again (a refusal changed nothing)')

  const elsewhere = await admin.post(`${keysPath}/${other.id}/revoke`, { csrf: csrfToken(shown.body), formToken: token })
  t.equal(elsewhere.statusCode, 409, 'a token answers only the form it came with')
  t.match(elsewhere.body, 'This form was already used for another change.')
  t.equal((await keys.find(other.id))?.status, 'active')
  const none = await admin.post(`${keysPath}/${other.id}/revoke`, { csrf: csrfToken(shown.body), formToken: '' })
  t.equal(none.statusCode, 400, 'a form without a token is refused')
  t.match(none.body, 'This form is out of date. Reload the page and try again.')
})

t.test('an allowlist that leaves out the key’s last-used address is saved only once confirmed', async (t) => {
  const { app, pool, keys } = await startConsole(t)
  const world = await createWorld(pool)
  const admin = await signedIn(app, world.admin.email)
  const keysPath = `/console/sub-accounts/${world.subAccountId}/keys`
  const key = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: world.subAccountId }, 'office', 'test')
  await pool.query(`UPDATE api_keys SET last_used_at = now(), last_used_ip = '127.0.0.1' WHERE id = $1`, [key.id])
  const pagePath = `${keysPath}/${key.id}/addresses`

  const warned = await admin.submit(pagePath, pagePath, { allowedCidrs: '198.51.100.0/24' })
  t.equal(warned.statusCode, 200, 'not saved yet')
  t.match(warned.body, 'This list would lock out the key’s current traffic')
  t.match(warned.body, 'The key was last used from <code>127.0.0.1</code>')
  t.match(warned.body, '<input type="hidden" name="confirmExcluded" value="127.0.0.1">')
  t.match(warned.body, '>Save anyway</button>')
  t.same((await keys.find(key.id))?.allowedCidrs, [], 'the list is unchanged')

  const including = await admin.submit(pagePath, pagePath, { allowedCidrs: '127.0.0.0/8\n198.51.100.0/24' })
  t.equal(including.statusCode, 303, 'a list that keeps the address is saved at once')
  const confirmed = await admin.post(pagePath, {
    csrf: csrfToken(warned.body),
    formToken: formTokenOf(warned.body)!,
    allowedCidrs: '198.51.100.0/24',
    confirmExcluded: '127.0.0.1',
  })
  t.equal(confirmed.statusCode, 303, 'confirmed: saved')
  t.same((await keys.find(key.id))?.allowedCidrs, ['198.51.100.0/24'])
})

async function waitFor(condition: () => Promise<boolean>): Promise<void> {
  while (!(await condition())) await new Promise((resolve) => setImmediate(resolve))
}
