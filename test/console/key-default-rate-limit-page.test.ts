/**
 * A sub-account's default rate limit for new keys in the console (issue 26),
 * in-process (app.inject) over a real Postgres: an agency admin sets it on its
 * page behind the CSRF token; the keys page shows it; a key a member then
 * creates gets it (the member cannot escape a lower limit with a fresh key);
 * a member may not change it; bad input is refused on the page; clearing it
 * puts new keys back on the route default (given in numbers, from the routes
 * file); each change is in the audit trail.
 */
import t from 'tap'
import { createKeyThroughConsole, createWorld, csrfToken, signedIn, startConsole } from './console-harness.js'

t.test('an admin sets the default, a member’s new key gets it and the member cannot change it', async (t) => {
  const { app, pool, keys } = await startConsole(t)
  const world = await createWorld(pool)
  const keysPath = `/console/sub-accounts/${world.subAccountId}/keys`
  const pagePath = `${keysPath}/default-rate-limit`
  const admin = await signedIn(app, world.admin.email)
  const member = await signedIn(app, world.member.email)

  t.match((await admin.get(keysPath)).body, /Rate limit of new keys: <strong>the route default<\/strong> · <a href="[^"]+\/default-rate-limit">Change/)
  const form = await admin.get(pagePath)
  t.equal(form.statusCode, 200)
  t.match(form.body, 'Now: <strong>the route default</strong>')
  t.match(form.body, '<p id="route-default">Route default: <strong>no limit for a key on its own</strong>.</p>', 'in numbers, from deploy/routes.yaml')
  t.match(form.body, 'all keys of Acme West together get <strong>100 requests per second, bursts of 200</strong> on each route')
  const refused = await admin.post(pagePath, { csrf: csrfToken(form.body), action: 'set', rate: '0', burst: '5' })
  t.equal(refused.statusCode, 400, 'a rate of 0 is refused on the page')
  t.match(refused.body, /role="alert"/)
  const saved = await admin.post(pagePath, { csrf: csrfToken(form.body), action: 'set', rate: '2', burst: '5' })
  t.equal(saved.statusCode, 303)
  t.equal(saved.headers.location, keysPath)
  t.match((await admin.get(String(saved.headers.location))).body, 'The default rate limit for new keys was changed.')

  const memberPage = await member.get(keysPath)
  t.match(memberPage.body, /Rate limit of new keys: <strong>120 requests per minute/, 'the member sees the default')
  t.notMatch(memberPage.body, /default-rate-limit">Change/, 'without a link to change it')
  t.match(
    memberPage.body,
    '<span class="hint">(only the agency’s owners and admins change it: they share out what the agency may send among its sub-accounts)</span>',
    'and told why',
  )
  t.equal((await member.get(pagePath)).statusCode, 403, 'and may not open the page')
  const memberForm = await member.get(keysPath)
  t.equal((await member.post(pagePath, { csrf: csrfToken(memberForm.body), action: 'clear' })).statusCode, 403, 'nor change it')

  const { plaintext } = await createKeyThroughConsole(member, keysPath, 'fresh key')
  t.ok(plaintext)
  const listed = await keys.list({ scope: 'SUB-ACCOUNT', subAccountId: world.subAccountId })
  t.same(listed.find((key) => key.name === 'fresh key')!.rateLimit, { rate: 2, burst: 5 }, 'the member’s new key gets the default')

  const cleared = await admin.post(pagePath, { csrf: csrfToken((await admin.get(pagePath)).body), action: 'clear' })
  t.equal(cleared.statusCode, 303)
  await createKeyThroughConsole(member, keysPath, 'after clear')
  const after = await keys.list({ scope: 'SUB-ACCOUNT', subAccountId: world.subAccountId })
  t.equal(after.find((key) => key.name === 'after clear')!.rateLimit, null, 'cleared: new keys get the route default')
  t.same(after.find((key) => key.name === 'fresh key')!.rateLimit, { rate: 2, burst: 5 }, 'the key made before keeps its limit')

  const { rows } = await pool.query<{ actor_id: string }>(
    `SELECT actor_id FROM audit_events WHERE type = 'sub-account.updated' AND sub_account_id = $1 ORDER BY seq`,
    [world.subAccountId],
  )
  t.same(
    rows.map((row) => row.actor_id),
    [world.admin.id, world.admin.id],
    'set and cleared, each recorded with the admin',
  )
  t.equal((await admin.get(`/console/agencies/${world.agencyId}/keys/default-rate-limit`)).statusCode, 404, 'agency keys have no such page')
})
