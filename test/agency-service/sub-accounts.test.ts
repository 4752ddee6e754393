import t from 'tap'
import type { TenantClient } from '../helpers/signed-request.js'
import { startAgencyService } from './fixture.js'

t.test("GET /v1/agency answers the caller's own agency", async (t) => {
  const { acme, globex } = await startAgencyService(t)
  const response = await acme.get('/v1/agency')
  t.equal(response.status, 200)
  t.same(Object.keys(response.item).sort(), ['createdAt', 'id', 'name'])
  t.match(response.json, { success: true, data: { id: acme.tenant.agencyId, name: 'Acme', createdAt: String } })
  t.match((await globex.get('/v1/agency')).item, { id: globex.tenant.agencyId, name: 'Globex' })
  const other = await acme.get(`/v1/agency?agency_id=${globex.tenant.agencyId}`)
  t.equal(other.status, 400, 'a tenant in the query is refused, never taken')
  t.same(other.json, { success: false, message: 'querystring.agency_id is not allowed' })
})

t.test('sub-accounts: create, read, list, rename, delete', async (t) => {
  const { acme } = await startAgencyService(t)
  const created = await acme.post('/v1/agency/sub-accounts', { name: ' West ' })
  t.equal(created.status, 201)
  t.match(created.item, { id: /^[0-9a-f-]{36}$/, agencyId: acme.tenant.agencyId, name: 'West', createdAt: String, updatedAt: String })
  const id = created.item['id']!

  t.same((await acme.get(`/v1/agency/sub-accounts/${id}`)).json, { success: true, data: created.item })
  t.same((await acme.get('/v1/agency/sub-accounts')).json, {
    success: true,
    data: [created.item],
    pagination: { limit: 20, nextCursor: null, hasMore: false },
  })

  const renamed = await acme.patch(`/v1/agency/sub-accounts/${id}`, { name: 'West Coast' })
  t.equal(renamed.status, 200)
  t.match(renamed.item, { id, name: 'West Coast', createdAt: created.item['createdAt'] })
  t.equal((await acme.get(`/v1/agency/sub-accounts/${id}`)).item['name'], 'West Coast')

  const deleted = await acme.delete(`/v1/agency/sub-accounts/${id}`)
  t.equal(deleted.status, 204)
  t.equal(deleted.text, '')
  const gone = await acme.get(`/v1/agency/sub-accounts/${id}`)
  t.equal(gone.status, 404)
  t.same(gone.json, { success: false, message: 'Sub-account not found' })
  t.same((await acme.get('/v1/agency/sub-accounts')).items, [])
})

t.test("another agency's sub-accounts answer 404, like ids that do not exist, and change nothing", async (t) => {
  const { acme, globex } = await startAgencyService(t)
  const owned = (await acme.post('/v1/agency/sub-accounts', { name: 'Owned' })).item
  const id = owned['id']!
  const missing = '6f1c1a5e-0000-4000-8000-000000000000'
  const attempts: Array<[string, (client: TenantClient, target: string) => ReturnType<TenantClient['get']>]> = [
    ['GET', (client, target) => client.get(`/v1/agency/sub-accounts/${target}`)],
    ['PATCH', (client, target) => client.patch(`/v1/agency/sub-accounts/${target}`, { name: 'Taken over' })],
    ['DELETE', (client, target) => client.delete(`/v1/agency/sub-accounts/${target}`)],
  ]
  for (const [verb, attempt] of attempts) {
    const foreign = await attempt(globex, id)
    t.equal(foreign.status, 404, `${verb} of another agency's sub-account`)
    t.same(foreign.json, { success: false, message: 'Sub-account not found' }, verb)
    t.equal(foreign.text, (await attempt(globex, missing)).text, `${verb}: the same answer as an id that does not exist`)
    t.equal((await attempt(acme, 'not-a-uuid')).status, 404, `${verb} of an id that is not a UUID`)
  }
  t.same((await globex.get('/v1/agency/sub-accounts')).items, [], 'the other agency lists none of them')
  t.same((await acme.get(`/v1/agency/sub-accounts/${id}`)).item, owned, 'the sub-account is unchanged')
  t.same((await acme.get('/v1/agency/sub-accounts')).items, [owned])
})

t.test('invalid bodies are refused with 400 naming the field', async (t) => {
  const { acme } = await startAgencyService(t)
  const existing = (await acme.post('/v1/agency/sub-accounts', { name: 'Existing' })).item
  const cases: Array<[string, 'POST' | 'PATCH', unknown, string]> = [
    ['no name', 'POST', {}, 'body.name is required'],
    ['a name of the wrong type', 'POST', { name: 42 }, 'body.name must be string'],
    ['an empty name', 'POST', { name: '' }, 'body.name must NOT have fewer than 1 characters'],
    ['a blank name', 'POST', { name: '  ' }, 'body.name must be 1 to 200 printable characters'],
    ['a name too long', 'POST', { name: 'x'.repeat(201) }, 'body.name must NOT have more than 200 characters'],
    ['an agency_id', 'POST', { name: 'x', agency_id: acme.tenant.agencyId }, 'body.agency_id is not allowed'],
    ['an unknown field', 'POST', { name: 'x', plan: 'gold' }, 'body.plan is not allowed'],
    ['an empty update', 'PATCH', {}, 'body must contain at least one field to change'],
    ['an update with an unknown field', 'PATCH', { name: 'x', agencyId: 'y' }, 'body.agencyId is not allowed'],
  ]
  for (const [name, method, body, message] of cases) {
    const response = method === 'POST' ? await acme.post('/v1/agency/sub-accounts', body) : await acme.patch(`/v1/agency/sub-accounts/${existing['id']}`, body)
    t.equal(response.status, 400, name)
    t.same(response.json, { success: false, message }, name)
  }
  t.same((await acme.get('/v1/agency/sub-accounts')).items, [existing], 'nothing was created or changed')
})

t.test('walking 250 sub-accounts in pages, while more are created, loses and repeats none', async (t) => {
  const { db, acme, globex } = await startAgencyService(t)
  const { rows } = await db.pool.query<{ id: string }>(
    `WITH made AS (
       INSERT INTO sub_accounts (agency_id, name, created_at, updated_at)
       SELECT $1, 'sub ' || i, timestamptz '2025-01-01T00:00:00Z' + (i / 4) * interval '1 microsecond', now()
         FROM generate_series(1, 250) AS i
       RETURNING id, created_at)
     SELECT id FROM made ORDER BY created_at, id`,
    [acme.tenant.agencyId],
  )
  const existing = rows.map((row) => row.id)
  await globex.post('/v1/agency/sub-accounts', { name: 'Not Acme' })
  const seen: string[] = []
  const added: string[] = []
  let cursor: string | null = null
  let pages = 0
  do {
    const query: string = cursor === null ? '?limit=11' : `?limit=11&cursor=${cursor}`
    const page = await acme.get(`/v1/agency/sub-accounts${query}`)
    t.equal(page.status, 200)
    seen.push(...page.items.map((item) => item['id']!))
    cursor = page.pagination.nextCursor
    t.equal(page.pagination.hasMore, cursor !== null)
    if (cursor !== null && pages++ % 5 === 0) added.push((await acme.post('/v1/agency/sub-accounts', { name: `new ${pages}` })).item['id']!)
  } while (cursor !== null)
  t.equal(new Set(seen).size, seen.length, 'none repeated')
  t.same(seen.slice(0, existing.length), existing, 'every sub-account that existed came, in order')
  t.same(seen.slice(existing.length), added, 'those created during the walk came after')
})

t.test('a bad limit or cursor is refused with 400', async (t) => {
  const { acme } = await startAgencyService(t)
  const cases: Array<[string, string]> = [
    ['limit=0', 'querystring.limit must be >= 1'],
    ['limit=101', 'querystring.limit must be <= 100'],
    ['limit=abc', 'querystring.limit must be integer'],
    ['cursor=garbage', 'querystring.cursor is not a valid cursor'],
  ]
  for (const [query, message] of cases) {
    const response = await acme.get(`/v1/agency/sub-accounts?${query}`)
    t.equal(response.status, 400, query)
    t.same(response.json, { success: false, message }, query)
  }
})
