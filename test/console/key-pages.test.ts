import t from 'tap'
import { hashKey, parseKey } from '@scoped/shared/keys'
import { ACTIVE_KEY_LIMIT } from '@scoped/agency-service/keys/key-service'
import { REVEAL_LIFETIME_MS } from '@scoped/agency-service/console/one-time-display'
import { createKeyThroughConsole, createWorld, csrfToken, signedIn, startConsole } from './console-harness.js'

t.test('creating an agency key shows the plaintext once, with a copy button and the warning, and never again', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const keysPath = `/console/agencies/${world.agencyId}/keys`

  const { created, reveal, plaintext } = await createKeyThroughConsole(owner, keysPath, 'billing sync')
  t.ok(parseKey(plaintext).ok, 'a well-formed key')
  t.match(String(created.headers.location), new RegExp(`^${keysPath}/[0-9a-f-]{36}/created$`), 'redirect after post')
  t.notOk(created.body.includes(plaintext), 'the redirect itself does not carry the plaintext')
  t.notOk(JSON.stringify(created.headers).includes(plaintext), 'nor do its headers (the cookie holds ciphertext only)')

  t.equal(reveal.statusCode, 200)
  t.equal(reveal.headers['cache-control'], 'no-store', 'the page with the plaintext is never cached')
  t.match(reveal.body, 'Copy this key now. It will not be shown again.')
  t.match(reveal.body, /<button type="button"[^>]*data-copy-target="new-key"[^>]*>Copy<\/button>/)
  t.match(reveal.body, /<label for="new-key">/)

  const { rows } = await pool.query<{ id: string; scope: string; key_hash: string; created_by: string; name: string }>(
    'SELECT id, scope, key_hash, created_by, name FROM api_keys',
  )
  t.same(rows, [{ id: rows[0]!.id, scope: 'AGENCY', key_hash: hashKey(plaintext), created_by: `user:${world.owner.id}`, name: 'billing sync' }])
  const stored = await pool.query('SELECT sealed_key FROM console_form_submissions')
  t.same(stored.rows, [{ sealed_key: null }], 'the sealed key is gone once shown')

  const again = await owner.get(String(created.headers.location))
  t.equal(again.statusCode, 410, 'a reload cannot show it again')
  t.notOk(again.body.includes(plaintext))
  t.match(again.body, 'cannot be shown again')

  const list = await owner.get(keysPath)
  t.equal(list.statusCode, 200)
  t.notOk(list.body.includes(plaintext), 'the list never shows it')
  t.match(list.body, 'billing sync')
  t.match(list.body, plaintext.slice(-4), 'the list shows the hint (last four characters)')
  for (const action of ['revoke', 'delete']) {
    t.notOk((await owner.get(`${keysPath}/${rows[0]!.id}/${action}`)).body.includes(plaintext), `nor the ${action} confirmation`)
  }
  t.equal((await pool.query('SELECT 1 FROM console_sessions WHERE csrf_token LIKE $1', [`%${plaintext}%`])).rowCount, 0)
})

t.test('the one-time display is bound to the session that created the key, and expires', async (t) => {
  const { app, pool, clock } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const admin = await signedIn(app, world.admin.email)
  const keysPath = `/console/agencies/${world.agencyId}/keys`

  const created = await owner.post(keysPath, { csrf: csrfToken((await owner.get(keysPath)).body), name: 'first' })
  const revealPath = String(created.headers.location)
  // The admin, with the owner's cookie copied over, still cannot read it: the key is bound to the owner's session.
  admin.jar.set('__Secure-sak-console-reveal', owner.jar.get('__Secure-sak-console-reveal')!)
  t.equal((await admin.get(revealPath)).statusCode, 410)

  const late = await owner.post(keysPath, { csrf: csrfToken((await owner.get(keysPath)).body), name: 'second' })
  clock.advance(REVEAL_LIFETIME_MS + 1000)
  t.equal((await owner.get(String(late.headers.location))).statusCode, 410, 'too late')
})

t.test('the reveal cookie is scoped to the one page that shows the key', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const keysPath = `/console/agencies/${world.agencyId}/keys`
  const created = await owner.post(keysPath, { csrf: csrfToken((await owner.get(keysPath)).body), name: 'k' })
  const cookie = [created.headers['set-cookie']]
    .flat()
    .map(String)
    .find((line) => line.startsWith('__Secure-sak-console-reveal='))!
  t.match(cookie, `Path=${String(created.headers.location)}`)
  t.match(cookie, /Max-Age=300/)
  t.match(cookie, /; Secure/)
  t.match(cookie, /; HttpOnly/)
  t.match(cookie, /; SameSite=Strict/)
})

t.test('revoke and delete ask for confirmation, take effect, and record the user', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const keysPath = `/console/sub-accounts/${world.subAccountId}/keys`
  await createKeyThroughConsole(owner, keysPath, 'crm import')
  const { rows } = await pool.query<{ id: string; key_hash: string }>('SELECT id, key_hash FROM api_keys')
  const keyId = rows[0]!.id

  const confirm = await owner.get(`${keysPath}/${keyId}/revoke`)
  t.equal(confirm.statusCode, 200)
  t.match(confirm.body, 'Revoke API key?')
  t.match(confirm.body, 'crm import')
  t.match(confirm.body, new RegExp(`<form method="post" action="${keysPath}/${keyId}/revoke">`))
  t.match(confirm.body, /<a href="[^"]+\/keys">Cancel<\/a>/)
  t.equal((await pool.query('SELECT 1 FROM api_keys WHERE revoked_at IS NULL')).rowCount, 1, 'looking at the confirmation changes nothing')

  const revoked = await owner.post(`${keysPath}/${keyId}/revoke`, { csrf: csrfToken(confirm.body) })
  t.equal(revoked.statusCode, 303)
  t.equal(revoked.headers.location, keysPath, 'no notice in the address')
  const list = await owner.get(String(revoked.headers.location))
  t.match(list.body, /Key crm import \(…[0-9A-Za-z]{4}\) was revoked\./, 'the notice names the key')
  t.notMatch((await owner.get(keysPath)).body, 'was revoked', 'shown once: a reload does not show it again')
  t.notMatch(list.body, /status-revoked">Revoked</, 'a revoked key is hidden by default')
  t.match((await owner.get(`${keysPath}?show=all`)).body, /status-revoked">Revoked</, 'and shown on asking')
  t.notMatch(list.body, `${keyId}/revoke`, 'no revoke action on a revoked key')
  const { rows: revokedRows } = await pool.query('SELECT revoked_by FROM api_keys WHERE id = $1', [keyId])
  t.same(revokedRows, [{ revoked_by: `user:${world.owner.id}` }])

  const confirmDelete = await owner.get(`${keysPath}/${keyId}/delete`)
  t.match(confirmDelete.body, 'Delete API key?')
  const deleted = await owner.post(`${keysPath}/${keyId}/delete`, { csrf: csrfToken(confirmDelete.body) })
  t.equal(deleted.statusCode, 303)
  t.equal(deleted.headers.location, keysPath)
  t.match((await owner.get(keysPath)).body, /Key crm import \(…[0-9A-Za-z]{4}\) was deleted/)
  t.equal((await pool.query('SELECT 1 FROM api_keys')).rowCount, 0)
  t.same((await pool.query('SELECT event, actor FROM api_key_events WHERE key_id = $1 ORDER BY id', [keyId])).rows, [
    { event: 'created', actor: `user:${world.owner.id}` },
    { event: 'revoked', actor: `user:${world.owner.id}` },
    { event: 'deleted', actor: `user:${world.owner.id}` },
  ])
  t.equal((await owner.get(`${keysPath}/${keyId}/delete`)).statusCode, 404, 'a deleted key is not found')
})

t.test('the list is newest first with name, state, created and last used', async (t) => {
  const { app, pool, keys } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const keysPath = `/console/agencies/${world.agencyId}/keys`
  for (const name of ['oldest', 'middle', 'newest']) await keys.create({ scope: 'AGENCY', agencyId: world.agencyId }, name, 'test')
  await pool.query(`UPDATE api_keys SET last_used_at = '2030-01-01T08:30:00Z' WHERE name = 'middle'`)
  const list = await owner.get(keysPath)
  t.ok(list.body.indexOf('newest') < list.body.indexOf('middle') && list.body.indexOf('middle') < list.body.indexOf('oldest'), 'newest first')
  for (const column of ['Key', 'State', 'Created', 'Last used']) t.match(list.body, `<th scope="col">${column}</th>`)
  for (const column of ['Scope', 'Revoked'])
    t.notMatch(list.body, `<th scope="col">${column}</th>`, `no ${column} column: the same, or empty, on every row of one scope`)
  t.match(list.body, '<time datetime="2030-01-01T08:30:00.000Z" title="2030-01-01 08:30 UTC">', 'a relative time with the exact time on hover')
  t.match(list.body, 'Never', 'a key never used says so')
  t.match(list.body, '3 of 25 active keys in use.')
})

t.test('the list shows a restricted key as Restricted, with its permissions, and nothing more for an unrestricted one', async (t) => {
  const { app, pool, keys } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const owned = { scope: 'SUB-ACCOUNT' as const, subAccountId: world.subAccountId }
  await keys.create(owned, 'reader', 'test', { permissions: ['contacts:write', 'calls:read'] })
  await keys.create(owned, 'open', 'test')
  const list = await owner.get(`/console/sub-accounts/${world.subAccountId}/keys`)
  t.match(list.body, 'Restricted: <code>calls:read</code>, <code>contacts:write</code>', 'sorted, each named')
  t.equal(list.body.split('Restricted:').length - 1, 1, 'only the restricted key says so')
})

t.test(`with ${ACTIVE_KEY_LIMIT} active keys the page says the limit is reached and creation is refused`, async (t) => {
  const { app, pool, keys } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const keysPath = `/console/sub-accounts/${world.subAccountId}/keys`
  for (let i = 0; i < ACTIVE_KEY_LIMIT; i++) await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: world.subAccountId }, `key ${i}`, 'test')

  const page = await owner.get(keysPath)
  t.match(page.body, 'Active API key limit reached for this scope')
  const refused = await owner.post(keysPath, { csrf: csrfToken(page.body), name: 'one too many' })
  t.equal(refused.statusCode, 400)
  t.match(refused.body, 'Active API key limit reached for this scope')
  t.match(refused.body, /<p class="field-error" id="key-name-error">Active API key limit reached/, 'shown inline, by the field')
  t.match(refused.body, /aria-describedby="key-name-hint key-name-error" aria-invalid="true"/)
  t.match(
    refused.body,
    /<div class="error-summary alert" role="alert"[^>]*autofocus[^>]*>[\s\S]*<a href="#key-name">Active API key limit reached/,
    'and in the summary',
  )
  t.match(refused.body, 'value="one too many"', 'the name typed is kept')
  t.equal((await pool.query('SELECT 1 FROM api_keys')).rowCount, ACTIVE_KEY_LIMIT)

  const { rows } = await pool.query<{ id: string }>('SELECT id FROM api_keys LIMIT 1')
  await owner.post(`${keysPath}/${rows[0]!.id}/revoke`, { csrf: csrfToken(page.body) })
  const { plaintext } = await createKeyThroughConsole(owner, keysPath, 'after a revoke')
  t.ok(parseKey(plaintext).ok, 'a revoked key frees a place')
})

t.test('an invalid name is refused inline', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const keysPath = `/console/agencies/${world.agencyId}/keys`
  for (const name of ['', '   ', 'x'.repeat(101)]) {
    const response = await owner.submit(keysPath, keysPath, { name })
    t.equal(response.statusCode, 400, JSON.stringify(name))
    t.match(response.body, /name (is required|must be 1 to 100 printable characters)/)
    t.match(response.body, 'aria-invalid="true"')
  }
  t.equal((await pool.query('SELECT 1 FROM api_keys')).rowCount, 0)
})

t.test('names and emails are escaped wherever they appear', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool, '<img src=x onerror=alert(1)>')
  const owner = await signedIn(app, world.owner.email)
  const keysPath = `/console/agencies/${world.agencyId}/keys`
  const hostile = `"><script>alert('k')</script>`
  const { reveal } = await createKeyThroughConsole(owner, keysPath, hostile)
  const list = await owner.get(keysPath)
  const home = await owner.get('/console')
  for (const [where, body] of [
    ['list', list.body],
    ['created page', reveal.body],
    ['home', home.body],
  ] as const) {
    t.notOk(body.includes('<script>alert'), `${where}: no script from a name`)
    t.notOk(body.includes('<img src=x'), `${where}: no markup from a name`)
  }
  t.match(list.body, '&quot;&gt;&lt;script&gt;alert(&#39;k&#39;)&lt;/script&gt;')
  t.match(home.body, '&lt;img src=x onerror=alert(1)&gt;')
})
