import t from 'tap'
import type { Pool } from '@scoped/shared/db'
import type { TenantClient } from '../helpers/signed-request.js'
import { startResourceService } from './fixture.js'

/**
 * 250 agents whose created_at values are close together on purpose: runs of
 * identical timestamps (ties broken by id) and neighbours one microsecond
 * apart (a cursor that kept only milliseconds would skip or repeat them).
 */
async function seedAgents(pool: Pool, subAccountId: string, count: number): Promise<string[]> {
  const { rows } = await pool.query<{ id: string }>(
    `INSERT INTO agents (sub_account_id, name, created_at, updated_at)
     SELECT $1, 'agent ' || i, t, t
       FROM generate_series(1, $2) AS i,
            LATERAL (SELECT timestamptz '2025-01-01T00:00:00Z' + (i / 3) * interval '1 microsecond' AS t) AS s
     RETURNING id`,
    [subAccountId, count],
  )
  const { rows: ordered } = await pool.query<{ id: string }>(`SELECT id FROM agents WHERE sub_account_id = $1 ORDER BY created_at, id`, [subAccountId])
  if (rows.length !== count) throw new Error('seeding failed')
  return ordered.map((row) => row.id)
}

async function walk(client: TenantClient, limit: number, between?: () => Promise<void>): Promise<string[]> {
  const seen: string[] = []
  let cursor: string | null = null
  for (let pages = 0; pages < 1000; pages++) {
    const path: string = `/v1/agents?limit=${limit}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`
    const page = await client.get(path)
    if (page.status !== 200) throw new Error(`${path}: ${page.status} ${page.text}`)
    seen.push(...page.items.map((item) => item['id']!))
    const { pagination } = page
    if (pagination.limit !== limit || page.items.length > limit) throw new Error(`page larger than ${limit}`)
    if (!pagination.hasMore) {
      if (pagination.nextCursor !== null) throw new Error('the last page has a next cursor')
      return seen
    }
    if (page.items.length !== limit || pagination.nextCursor === null) throw new Error('a page before the last is short or has no cursor')
    cursor = pagination.nextCursor
    await between?.()
  }
  throw new Error('the walk did not end')
}

t.test('walking 250 agents in pages returns each exactly once, in order', async (t) => {
  const { db, alice } = await startResourceService(t)
  const ids = await seedAgents(db.pool, alice.tenant.subAccountId!, 250)
  for (const limit of [1, 7, 20, 100]) {
    t.same(await walk(alice, limit), ids, `limit ${limit}`)
  }
  const first = await alice.get('/v1/agents')
  t.equal(first.items.length, 20, 'the default limit is 20')
  t.match(first.pagination, { limit: 20, hasMore: true, nextCursor: String })
})

t.test('rows inserted during a walk cause no loss and no duplicates', async (t) => {
  const { db, alice, bob } = await startResourceService(t)
  const ids = await seedAgents(db.pool, alice.tenant.subAccountId!, 250)
  const inserted: string[] = []
  let n = 0
  const insertSome = async (): Promise<void> => {
    // Concurrent writers, through the API and straight into the table.
    const made = await Promise.all([
      alice.post('/v1/agents', { name: `new ${n++}` }),
      alice.post('/v1/agents', { name: `new ${n++}` }),
      bob.post('/v1/agents', { name: `bob ${n++}` }),
    ])
    inserted.push(made[0].item['id']!, made[1].item['id']!)
  }
  const seen = await walk(alice, 9, insertSome)
  t.equal(new Set(seen).size, seen.length, 'no row was returned twice')
  t.same(seen.slice(0, ids.length), ids, 'every row that existed when the walk began came, in order')
  // Two inserts run at once, so their order between themselves is not fixed.
  t.same([...seen.slice(ids.length)].sort(), [...inserted].sort(), 'rows inserted during the walk came after, each once')
  t.notOk(
    seen.some((id) => !ids.includes(id) && !inserted.includes(id)),
    "no other sub-account's row appeared",
  )
})

t.test("a cursor is only a position: another tenant's cursor shows that tenant nothing of the first", async (t) => {
  const { db, alice, carol } = await startResourceService(t)
  await seedAgents(db.pool, alice.tenant.subAccountId!, 30)
  const carols = (await carol.post('/v1/agents', { name: 'Carol agent' })).item
  const cursor = (await alice.get('/v1/agents?limit=5')).pagination.nextCursor!
  const page = await carol.get(`/v1/agents?cursor=${encodeURIComponent(cursor)}`)
  t.equal(page.status, 200)
  t.same(
    page.items.map((item) => item['id']),
    [carols['id']],
  )
})

t.test('a bad limit or cursor is refused with 400 naming it', async (t) => {
  const { db, alice } = await startResourceService(t)
  await seedAgents(db.pool, alice.tenant.subAccountId!, 3)
  const good = (await alice.get('/v1/agents?limit=1')).pagination.nextCursor!
  const decoded = Buffer.from(good, 'base64url').toString()
  const cases: Array<[string, string]> = [
    ['limit=0', 'querystring.limit must be >= 1'],
    ['limit=101', 'querystring.limit must be <= 100'],
    ['limit=abc', 'querystring.limit must be integer'],
    ['limit=-1', 'querystring.limit must be integer'],
    ['limit=1.5', 'querystring.limit must be integer'],
    ['limit=', 'querystring.limit must be integer'],
    ['limit=1&limit=2', 'querystring.limit must be integer'],
    ['limit=99999999', 'querystring.limit must be integer'],
    ['cursor=garbage', 'querystring.cursor is not a valid cursor'],
    ['cursor=%21%21%21', 'querystring.cursor is not a valid cursor'],
    ['cursor=', 'querystring.cursor must NOT have fewer than 1 characters'],
    [`cursor=${Buffer.from('123.not-a-uuid').toString('base64url')}`, 'querystring.cursor is not a valid cursor'],
    [`cursor=${Buffer.from(decoded.replace(/^[0-9]+/, 'x')).toString('base64url')}`, 'querystring.cursor is not a valid cursor'],
    [`cursor=${good}=`, 'querystring.cursor is not a valid cursor'],
    [`cursor=${'A'.repeat(201)}`, 'querystring.cursor must NOT have more than 200 characters'],
    ['sub_account_id=x', 'querystring.sub_account_id is not allowed'],
  ]
  for (const [query, message] of cases) {
    const response = await alice.get(`/v1/agents?${query}`)
    t.equal(response.status, 400, query)
    t.same(response.json, { success: false, message }, query)
  }
  for (const resource of ['contacts', 'calls']) {
    t.equal((await alice.get(`/v1/${resource}?limit=101`)).status, 400, `${resource} validates its query too`)
    t.equal((await alice.get(`/v1/${resource}?cursor=garbage`)).status, 400, `${resource} validates its cursor too`)
  }
  t.equal((await alice.get('/v1/agents?limit=100')).status, 200, 'limit=100 is allowed')
  t.equal((await alice.get(`/v1/agents?limit=1&cursor=${good}`)).status, 200, 'a cursor this API issued is accepted')
})
