import t from 'tap'
import { createKeyThroughConsole, createUserWith, createWorld, csrfToken, signedIn, startConsole } from './console-harness.js'

t.test('owners and admins manage agency keys', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const keysPath = `/console/agencies/${world.agencyId}/keys`
  for (const user of [world.owner, world.admin]) {
    const client = await signedIn(app, user.email)
    const page = await client.get(keysPath)
    t.match(page.body, '<h2 id="create-heading">Create a key</h2>')
    await createKeyThroughConsole(client, keysPath, `made by ${user.email}`)
  }
  t.equal((await pool.query(`SELECT 1 FROM api_keys WHERE scope = 'AGENCY'`)).rowCount, 2)
})

t.test('a member sees the agency keys but the server refuses them every change (403)', async (t) => {
  const { app, pool, keys } = await startConsole(t)
  const world = await createWorld(pool)
  const agencyKey = await keys.create({ scope: 'AGENCY', agencyId: world.agencyId }, 'agency key', 'test')
  const member = await signedIn(app, world.member.email)
  const keysPath = `/console/agencies/${world.agencyId}/keys`

  const page = await member.get(keysPath)
  t.equal(page.statusCode, 200)
  t.match(page.body, 'agency key')
  t.notMatch(page.body, 'Create a key', 'no create form')
  t.notMatch(page.body, `${agencyKey.id}/revoke`, 'no revoke link')
  t.match(page.body, 'Only agency owners and admins can create, revoke or delete agency API keys.')

  // The page hides the form, but the server is what refuses.
  const token = csrfToken((await member.get('/console')).body)
  const create = await member.post(keysPath, { csrf: token, name: 'sneaky' })
  t.equal(create.statusCode, 403)
  t.match(create.body, 'Only agency owners and admins')
  for (const action of ['revoke', 'delete']) {
    t.equal((await member.get(`${keysPath}/${agencyKey.id}/${action}`)).statusCode, 403, `${action} confirmation`)
    t.equal((await member.post(`${keysPath}/${agencyKey.id}/${action}`, { csrf: token })).statusCode, 403, action)
  }
  t.same((await pool.query(`SELECT name, revoked_at FROM api_keys`)).rows, [{ name: 'agency key', revoked_at: null }], 'nothing changed')
})

t.test('a member manages the keys of a sub-account they belong to, and cannot see the others', async (t) => {
  const { app, pool, keys } = await startConsole(t)
  const world = await createWorld(pool)
  const member = await signedIn(app, world.member.email)
  const ownPath = `/console/sub-accounts/${world.subAccountId}/keys`

  const home = await member.get('/console')
  t.match(home.body, `href="${ownPath}"`)
  t.notMatch(home.body, world.otherSubAccountId, 'the other sub-account is not offered')

  await createKeyThroughConsole(member, ownPath, 'crm import')
  const { rows } = await pool.query<{ id: string; created_by: string }>(`SELECT id, created_by FROM api_keys WHERE sub_account_id = $1`, [world.subAccountId])
  t.equal(rows[0]!.created_by, `user:${world.member.id}`)
  const token = csrfToken((await member.get(ownPath)).body)
  t.equal((await member.post(`${ownPath}/${rows[0]!.id}/revoke`, { csrf: token })).statusCode, 303, 'revoke')
  t.equal((await member.post(`${ownPath}/${rows[0]!.id}/delete`, { csrf: token })).statusCode, 303, 'delete')

  const otherKey = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: world.otherSubAccountId }, 'east key', 'test')
  const otherPath = `/console/sub-accounts/${world.otherSubAccountId}/keys`
  t.equal((await member.get(otherPath)).statusCode, 404, 'another sub-account of the agency is not found')
  t.equal((await member.post(otherPath, { csrf: token, name: 'sneaky' })).statusCode, 404)
  t.equal((await member.post(`${otherPath}/${otherKey.id}/revoke`, { csrf: token })).statusCode, 404)
  // Its key through the member's own sub-account: not found either, and untouched.
  t.equal((await member.post(`${ownPath}/${otherKey.id}/revoke`, { csrf: token })).statusCode, 404)
  t.equal((await member.post(`${ownPath}/${otherKey.id}/delete`, { csrf: token })).statusCode, 404)
  t.same((await pool.query(`SELECT revoked_at FROM api_keys WHERE id = $1`, [otherKey.id])).rows, [{ revoked_at: null }])
})

t.test('agency owners and admins manage every sub-account of their agency', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const admin = await signedIn(app, world.admin.email)
  for (const subAccountId of [world.subAccountId, world.otherSubAccountId]) {
    await createKeyThroughConsole(admin, `/console/sub-accounts/${subAccountId}/keys`, 'made by the admin')
  }
  t.equal((await pool.query(`SELECT 1 FROM api_keys WHERE scope = 'SUB-ACCOUNT'`)).rowCount, 2)
})

t.test("a session of another agency can neither see nor touch this agency's keys", async (t) => {
  const { app, pool, keys } = await startConsole(t)
  const acme = await createWorld(pool, 'Acme')
  const globex = await createWorld(pool, 'Globex')
  const agencyKey = await keys.create({ scope: 'AGENCY', agencyId: acme.agencyId }, 'acme agency key', 'test')
  const subKey = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: acme.subAccountId }, 'acme sub key', 'test')
  const intruder = await signedIn(app, globex.owner.email)
  const token = csrfToken((await intruder.get('/console')).body)

  const home = await intruder.get('/console')
  t.notMatch(home.body, /acme/i, 'the other agency is not listed')

  const acmeAgency = `/console/agencies/${acme.agencyId}/keys`
  const acmeSub = `/console/sub-accounts/${acme.subAccountId}/keys`
  for (const path of [acmeAgency, acmeSub, `${acmeAgency}/${agencyKey.id}/revoke`, `${acmeSub}/${subKey.id}/delete`, `${acmeAgency}/${agencyKey.id}/created`]) {
    const response = await intruder.get(path)
    t.equal(response.statusCode, 404, `GET ${path}`)
    t.notMatch(response.body, /acme/i, `GET ${path} says nothing about it`)
  }
  for (const path of [acmeAgency, acmeSub]) t.equal((await intruder.post(path, { csrf: token, name: 'planted' })).statusCode, 404, `create at ${path}`)
  for (const action of ['revoke', 'delete']) {
    t.equal((await intruder.post(`${acmeAgency}/${agencyKey.id}/${action}`, { csrf: token })).statusCode, 404)
    t.equal((await intruder.post(`${acmeSub}/${subKey.id}/${action}`, { csrf: token })).statusCode, 404)
  }

  // Acme's key ids through Globex's own pages: "not found", exactly as an id that does not exist.
  const globexAgency = `/console/agencies/${globex.agencyId}/keys`
  const globexSub = `/console/sub-accounts/${globex.subAccountId}/keys`
  for (const [path, keyId] of [
    [globexAgency, agencyKey.id],
    [globexAgency, subKey.id],
    [globexSub, subKey.id],
    [globexSub, agencyKey.id],
    [globexAgency, '00000000-0000-4000-8000-000000000000'],
    [globexAgency, 'not-a-uuid'],
  ] as const) {
    for (const action of ['revoke', 'delete']) {
      t.equal((await intruder.get(`${path}/${keyId}/${action}`)).statusCode, 404, `GET ${action} of ${keyId} via ${path}`)
      t.equal((await intruder.post(`${path}/${keyId}/${action}`, { csrf: token })).statusCode, 404, `POST ${action} of ${keyId} via ${path}`)
    }
  }
  t.same(
    (await pool.query(`SELECT name, revoked_at FROM api_keys ORDER BY name`)).rows,
    [
      { name: 'acme agency key', revoked_at: null },
      { name: 'acme sub key', revoked_at: null },
    ],
    "Acme's keys are untouched and nothing was planted",
  )
})

t.test('a user in two agencies sees both, each with its own role', async (t) => {
  const { app, pool } = await startConsole(t)
  const acme = await createWorld(pool, 'Acme')
  const globex = await createWorld(pool, 'Globex')
  const user = await createUserWith(pool, acme.agencyId, 'member')
  await pool.query(`INSERT INTO agency_memberships (user_id, agency_id, role) VALUES ($1, $2, 'admin')`, [user.id, globex.agencyId])
  const client = await signedIn(app, user.email)
  const home = await client.get('/console')
  t.match(home.body, 'Acme')
  t.match(home.body, 'Globex')
  t.notMatch((await client.get(`/console/agencies/${acme.agencyId}/keys`)).body, 'Create a key', 'member in Acme')
  t.match((await client.get(`/console/agencies/${globex.agencyId}/keys`)).body, 'Create a key', 'admin in Globex')
  t.equal((await client.get(`/console/sub-accounts/${acme.subAccountId}/keys`)).statusCode, 404, "not in Acme's sub-accounts")
  t.equal((await client.get(`/console/sub-accounts/${globex.subAccountId}/keys`)).statusCode, 200, "an admin of Globex sees Globex's")
})
