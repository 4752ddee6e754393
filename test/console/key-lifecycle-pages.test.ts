/**
 * The console's key lifecycle pages, in-process (app.inject) over a real
 * Postgres: create with an expiry and allowed addresses, roll with a grace
 * preset, change the addresses, and the audit trail of agency settings and
 * of sub-account settings, with who may see what.
 */
import t from 'tap'
import { createKeyThroughConsole, createWorld, csrfToken, signedIn, startConsole } from './console-harness.js'

const DAY = 86_400_000

t.test('create with an expiry preset and allowed addresses; both shown, stored and refused inline when wrong', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const keysPath = `/console/sub-accounts/${world.subAccountId}/keys`

  const page = await owner.get(keysPath)
  t.match(page.body, '<label for="key-expires">Expires</label>')
  for (const option of ['Never', 'In 7 days', 'In 30 days', 'In 90 days', 'In 1 year', 'On the date given']) t.match(page.body, `>${option}</option>`)
  t.match(page.body, '<label for="key-cidrs">Allowed addresses</label>')
  t.match(page.body, '<textarea id="key-cidrs" name="allowedCidrs"')

  const before = Date.now()
  const created = await owner.submit(keysPath, keysPath, { name: 'quarterly', expires: '90d', expiresOn: '', allowedCidrs: '203.0.113.0/24\n2001:DB8::/32' })
  t.equal(created.statusCode, 303)
  const reveal = await owner.get(String(created.headers.location))
  t.match(reveal.body, 'Copy this key now. It will not be shown again.')
  t.match(reveal.body, 'This key expires at <time datetime=')
  t.match(reveal.body, 'It can be used only from <code>203.0.113.0/24</code>, <code>2001:db8::/32</code>.')
  const { rows } = await pool.query<{ expires_at: Date; cidrs: string[]; created_by: string }>(
    `SELECT expires_at, allowed_cidrs::text[] AS cidrs, created_by FROM api_keys WHERE name = 'quarterly'`,
  )
  t.ok(Math.abs(rows[0]!.expires_at.getTime() - (before + 90 * DAY)) < 60_000, 'expires in 90 days (real time, not the session clock)')
  t.same(rows[0]!.cidrs, ['203.0.113.0/24', '2001:db8::/32'])

  const list = await owner.get(keysPath)
  t.match(list.body, '<th scope="col">Addresses</th>')
  t.match(list.body, /expires <time datetime="[^"]+" title="[^"]+ UTC">in (89|90) d<\/time>/, 'the expiry, relative, in the state')
  t.match(list.body, '<code>203.0.113.0/24</code>')

  const dated = await owner.submit(keysPath, keysPath, { name: 'dated', expires: 'date', expiresOn: '2031-05-06T07:08', allowedCidrs: '' })
  t.equal(dated.statusCode, 303)
  t.same(
    (await pool.query(`SELECT expires_at FROM api_keys WHERE name = 'dated'`)).rows,
    [{ expires_at: new Date('2031-05-06T07:08:00Z') }],
    'the date field, read as UTC',
  )
  t.match((await owner.get(keysPath)).body, '<td data-label="Addresses"><span>Any</span></td>', 'a key without an allowlist: any address')

  const refusals: Array<[string, Record<string, string>, string, string]> = [
    ['no date for "on the date below"', { name: 'x', expires: 'date', expiresOn: '' }, 'key-expires-on-error', 'Enter the expiry date and time, in UTC'],
    ['a date in the past', { name: 'x', expires: 'date', expiresOn: '2020-01-01T00:00' }, 'key-expires-on-error', 'The expiry must be in the future'],
    [
      'a date while Expires says Never',
      { name: 'x', expires: 'never', expiresOn: '2031-01-01T00:00' },
      'key-expires-on-error',
      'An expiry date was entered, but Expires says “Never”.',
    ],
    ['an unknown preset', { name: 'x', expires: 'forever' }, 'key-expires-error', 'Choose when the key expires'],
    [
      'an address with host bits',
      { name: 'x', allowedCidrs: '10.1.2.3/8' },
      'key-cidrs-error',
      '&quot;10.1.2.3/8&quot; has bits set after its prefix length; the block is 10.0.0.0/8',
    ],
    ['not an address', { name: 'x', allowedCidrs: 'office' }, 'key-cidrs-error', '&quot;office&quot; is not an IP address or CIDR block'],
  ]
  for (const [name, form, errorId, message] of refusals) {
    const response = await owner.submit(keysPath, keysPath, form)
    t.equal(response.statusCode, 400, name)
    t.match(response.body, `<p class="field-error" id="${errorId}">${message}`, `${name}: shown beside its field`)
    t.match(response.body, `aria-describedby="${errorId.replace('-error', '-hint')} ${errorId}" aria-invalid="true"`, `${name}: that field is marked`)
    t.match(response.body, `<a href="#${errorId.replace('-error', '')}">${message}`, `${name}: in the summary, linked to the field`)
    t.match(response.body, 'value="x"', `${name}: the name typed is kept`)
  }
  const kept = await owner.submit(keysPath, keysPath, { name: 'x', allowedCidrs: '10.0.0.0/8\nnope' })
  t.match(kept.body, '>10.0.0.0/8\nnope</textarea>', 'the addresses typed are kept')
  t.equal((await pool.query(`SELECT 1 FROM api_keys WHERE name = 'x'`)).rowCount, 0, 'nothing was created')
})

t.test('roll with a grace preset: the new key shown once, the old one working until the end of its grace', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const keysPath = `/console/agencies/${world.agencyId}/keys`
  const { plaintext: oldKey } = await createKeyThroughConsole(owner, keysPath, 'billing sync')
  const oldId = (await pool.query<{ id: string }>(`SELECT id FROM api_keys`)).rows[0]!.id

  const list = await owner.get(keysPath)
  t.match(list.body, new RegExp(`<a href="${keysPath}/${oldId}/roll" aria-label="Roll billing sync \\(…[0-9A-Za-z]{4}\\)">Roll</a>`))
  const rollPage = await owner.get(`${keysPath}/${oldId}/roll`)
  t.equal(rollPage.statusCode, 200)
  t.match(rollPage.body, '<h1>Roll API key?</h1>')
  t.match(rollPage.body, '<legend>Grace period for the old key</legend>')
  for (const [value, label] of [
    ['0', 'End the old key now'],
    ['3600', 'Keep the old key working for 1 hour'],
    ['86400', 'Keep the old key working for 24 hours'],
    ['604800', 'Keep the old key working for 7 days'],
  ]) {
    t.match(
      rollPage.body,
      new RegExp(`<input type="radio" id="grace-${value}" name="grace" value="${value}"[^>]*><label for="grace-${value}">${label}</label>`),
    )
  }
  t.match(rollPage.body, 'id="grace-86400" name="grace" value="86400" checked', 'the default: 24 hours')

  const before = Date.now()
  const rolled = await owner.post(`${keysPath}/${oldId}/roll`, { csrf: csrfToken(rollPage.body), grace: '3600' })
  t.equal(rolled.statusCode, 303)
  const newId = (await pool.query<{ id: string }>(`SELECT id FROM api_keys WHERE replaces = $1`, [oldId])).rows[0]!.id
  t.equal(rolled.headers.location, `${keysPath}/${newId}/created`, 'to the new key’s one-time display')
  const reveal = await owner.get(String(rolled.headers.location))
  t.equal(reveal.statusCode, 200)
  const plaintext = /id="new-key" readonly value="([^"]+)"/.exec(reveal.body)![1]!
  t.not(plaintext, oldKey)
  t.match(reveal.body, 'This key replaces “billing sync”')
  t.match(reveal.body, 'The old key keeps working until <time datetime=')
  const { rows } = await pool.query<{ expires_at: Date; replaced_by: string }>(`SELECT expires_at, replaced_by FROM api_keys WHERE id = $1`, [oldId])
  t.equal(rows[0]!.replaced_by, newId)
  t.ok(Math.abs(rows[0]!.expires_at.getTime() - (before + 3_600_000)) < 60_000, 'the old key ends in 1 hour')

  const after = await owner.get(keysPath)
  t.match(after.body, 'Rolling — ends in 59 min', 'the old key in its grace period says so, with the time left')
  t.match(after.body, new RegExp(`Replaced by <a href="#key-${newId}"`), 'and links its successor')
  t.ok(after.body.indexOf(`id="key-${newId}"`) < after.body.indexOf(`id="key-${oldId}"`), 'the successor sits right above it')
  t.notMatch(after.body, `${oldId}/roll`, 'a rolled key cannot be rolled again')
  t.match(after.body, `${newId}/roll`)
  t.match(after.body, '1 of 25 active keys in use.', 'the rolled key does not count')

  const again = await owner.post(`${keysPath}/${oldId}/roll`, { csrf: csrfToken(rollPage.body), grace: '0' })
  t.equal(again.statusCode, 400)
  t.match(again.body, 'This key was already rolled; roll the key that replaced it instead')
  const badGrace = await owner.post(`${keysPath}/${newId}/roll`, { csrf: csrfToken(rollPage.body), grace: '2592001' })
  t.equal(badGrace.statusCode, 400)
  t.match(badGrace.body, 'Choose how long the old key keeps working')
  const noToken = await owner.post(`${keysPath}/${newId}/roll`, { grace: '0' })
  t.equal(noToken.statusCode, 403, 'a roll without the CSRF token is refused')

  const now = await owner.post(`${keysPath}/${newId}/roll`, { csrf: csrfToken(rollPage.body), grace: '0' })
  t.equal(now.statusCode, 303)
  const thirdReveal = await owner.get(String(now.headers.location))
  t.match(thirdReveal.body, 'The old key has stopped working.')
  t.match((await owner.get(`${keysPath}?show=all`)).body, /status-replaced">Replaced</, 'a key ended by its roll is replaced, not expired')
})

t.test('the allowed addresses of a key change on their own page', async (t) => {
  const { app, pool, keys } = await startConsole(t)
  const world = await createWorld(pool)
  const member = await signedIn(app, world.member.email)
  const keysPath = `/console/sub-accounts/${world.subAccountId}/keys`
  const key = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: world.subAccountId }, 'office', 'test', { allowedCidrs: ['198.51.100.0/24'] })

  const page = await member.get(`${keysPath}/${key.id}/addresses`)
  t.equal(page.statusCode, 200)
  t.match(page.body, '>198.51.100.0/24</textarea>')
  const saved = await member.post(`${keysPath}/${key.id}/addresses`, { csrf: csrfToken(page.body), allowedCidrs: '192.0.2.0/24, 2001:db8::1' })
  t.equal(saved.statusCode, 303)
  t.equal(saved.headers.location, keysPath)
  t.match((await member.get(String(saved.headers.location))).body, /The allowed addresses of key [^<]+ \(…[0-9A-Za-z]{4}\) were changed\./)
  t.same((await pool.query(`SELECT allowed_cidrs::text[] AS cidrs FROM api_keys WHERE id = $1`, [key.id])).rows, [
    { cidrs: ['192.0.2.0/24', '2001:db8::1/128'] },
  ])

  const refused = await member.post(`${keysPath}/${key.id}/addresses`, { csrf: csrfToken(page.body), allowedCidrs: '192.0.2.0/24\n300.1.1.1' })
  t.equal(refused.statusCode, 400)
  t.match(refused.body, 'id="key-cidrs-error">Line 2: &quot;300.1.1.1&quot; is not an IP address or CIDR block')
  t.match(refused.body, '>192.0.2.0/24\n300.1.1.1</textarea>')
  const cleared = await member.post(`${keysPath}/${key.id}/addresses`, { csrf: csrfToken(page.body), allowedCidrs: '' })
  t.equal(cleared.statusCode, 303, 'empty: any address')
  t.same((await pool.query(`SELECT allowed_cidrs::text[] AS cidrs FROM api_keys WHERE id = $1`, [key.id])).rows, [{ cidrs: [] }])

  const other = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: world.otherSubAccountId }, 'east', 'test')
  t.equal(
    (await member.get(`/console/sub-accounts/${world.otherSubAccountId}/keys/${other.id}/addresses`)).statusCode,
    404,
    'another sub-account’s key: not found',
  )
  const agencyKey = await keys.create({ scope: 'AGENCY', agencyId: world.agencyId }, 'agency', 'test')
  t.equal((await member.get(`/console/agencies/${world.agencyId}/keys/${agencyKey.id}/addresses`)).statusCode, 403, 'an agency key, for a member: not allowed')
  t.equal((await member.get(`/console/agencies/${world.agencyId}/keys/${agencyKey.id}/roll`)).statusCode, 403)
})

t.test('the audit trail: the agency’s for owners and admins, a sub-account’s for whoever sees its keys', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email, '203.0.113.77')
  const member = await signedIn(app, world.member.email, '2001:db8::42')
  const agencyKeys = `/console/agencies/${world.agencyId}/keys`
  const subKeys = `/console/sub-accounts/${world.subAccountId}/keys`
  await createKeyThroughConsole(owner, agencyKeys, 'agency automation')
  const { created } = await createKeyThroughConsole(member, subKeys, 'crm import')
  const subKeyId = /\/keys\/([0-9a-f-]{36})\/created$/.exec(String(created.headers.location))![1]!
  const rollPage = await member.get(`${subKeys}/${subKeyId}/roll`)
  await member.post(`${subKeys}/${subKeyId}/roll`, { csrf: csrfToken(rollPage.body), grace: '3600' })

  const keysPage = await owner.get(agencyKeys)
  t.match(keysPage.body, `<a href="/console/agencies/${world.agencyId}/audit">Audit trail</a>`, 'agency settings link to the trail')
  const agencyTrail = await owner.get(`/console/agencies/${world.agencyId}/audit`)
  t.equal(agencyTrail.statusCode, 200)
  t.match(agencyTrail.body, '<h1>Audit trail</h1>')
  t.match(agencyTrail.body, 'aria-current="page">Audit trail</a>')
  for (const text of [
    'Key created',
    'Key rolled',
    'Sub-account created',
    'agency automation',
    'crm import',
    world.owner.email,
    world.member.email,
    '<code>203.0.113.77</code>',
    '<code>2001:db8::42</code>',
  ]) {
    t.match(agencyTrail.body, text, `the agency trail shows ${text}`)
  }
  t.ok(agencyTrail.body.indexOf('Key rolled') < agencyTrail.body.indexOf('agency automation'), 'newest first')

  const filtered = await owner.get(`/console/agencies/${world.agencyId}/audit?type=key.rolled`)
  t.match(filtered.body, 'Key rolled')
  t.notMatch(filtered.body, '<span class="event-type">Key created</span>')
  t.match(filtered.body, '<option value="key.rolled" selected>')

  t.equal((await member.get(`/console/agencies/${world.agencyId}/audit`)).statusCode, 403, 'a member cannot read the agency’s trail')
  t.notMatch((await member.get(agencyKeys)).body, '/audit"', 'nor is it offered')
  const subTrail = await member.get(`/console/sub-accounts/${world.subAccountId}/audit`)
  t.equal(subTrail.statusCode, 200, 'the member reads their sub-account’s trail')
  t.match(subTrail.body, 'crm import')
  t.notMatch(subTrail.body, 'agency automation', 'and only its own events')
  t.equal((await member.get(`/console/sub-accounts/${world.otherSubAccountId}/audit`)).statusCode, 404, 'another sub-account’s trail is not found')
  t.equal((await owner.get(`/console/sub-accounts/${world.otherSubAccountId}/audit`)).statusCode, 200, 'the owner reads any of the agency’s')

  const many = await signedIn(app, world.admin.email)
  for (let i = 0; i < 55; i++)
    await pool.query(
      `INSERT INTO audit_events (type, actor_kind, actor_id, agency_id, sub_account_id) VALUES ('sub-account.created', 'cli', 'ctl:bulk', $1, $2)`,
      [world.agencyId, world.otherSubAccountId],
    )
  const first = await many.get(`/console/agencies/${world.agencyId}/audit`)
  const older = /<a class="button button-secondary" href="([^"]+)">Older events<\/a>/.exec(first.body)
  t.ok(older, 'more than a page: a link to older events')
  const second = await many.get(older![1]!.replaceAll('&amp;', '&'))
  t.equal(second.statusCode, 200)
  t.match(second.body, 'agency automation', 'the oldest events are on the next page')
  t.equal((await many.get(`/console/agencies/${world.agencyId}/audit?cursor=nonsense`)).statusCode, 400)
})
