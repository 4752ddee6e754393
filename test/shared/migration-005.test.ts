/**
 * Migration 005 (the key lifecycle) on a populated database: a database at
 * 004 with agencies, sub-accounts, keys (active, revoked, used) and the old
 * audit table's rows is migrated; every key works exactly as before (no
 * expiry, any address), the old rows are in the new trail with their actors
 * read as the code wrote them, and the old table's readers still read it.
 */
import { readdirSync } from 'node:fs'
import t from 'tap'
import pg from 'pg'
import { runner } from 'node-pg-migrate'
import { createPool } from '@scoped/shared/db'
import { hashKey, generateKey } from '@scoped/shared/keys'
import { lookupKeyByHash } from '@scoped/shared/key-store'
import { migrate, migrationsDir } from '@scoped/shared/migrate'
import { emptyTestDatabase } from '../helpers/database.js'

/** 005 and the migrations after it, in order. */
function migrationsFrom005(): string[] {
  return readdirSync(migrationsDir)
    .filter((file) => /^\d+_[a-z0-9_]+\.sql$/.test(file))
    .map((file) => file.replace(/\.sql$/, ''))
    .sort()
    .filter((name) => name >= '005_key_lifecycle')
}

t.test('005 on a database populated at 004', async (t) => {
  const url = new URL((await emptyTestDatabase(t)).url)

  const client = new pg.Client({ connectionString: url.href })
  await client.connect()
  const applied = await runner({
    dbClient: client,
    dir: migrationsDir,
    direction: 'up',
    migrationsTable: 'schema_migrations',
    count: 4,
    singleTransaction: true,
    log: () => undefined,
  })
  t.same(
    applied.map((migration) => migration.name),
    ['001_tenancy_and_keys', '002_resources', '003_console', '004_invalidation_log'],
  )
  const agency = (await client.query(`INSERT INTO agencies (name) VALUES ('Old') RETURNING id`)).rows[0].id as string
  const sub = (await client.query(`INSERT INTO sub_accounts (agency_id, name) VALUES ($1, 'Old West') RETURNING id`, [agency])).rows[0].id as string
  const plaintexts = [generateKey(), generateKey(), generateKey()]
  const ids: string[] = []
  for (const [index, key] of plaintexts.entries()) {
    const scope = index === 0 ? 'AGENCY' : 'SUB-ACCOUNT'
    const row = await client.query(
      `INSERT INTO api_keys (scope, agency_id, sub_account_id, name, key_hash, hint, created_by, last_used_at)
       VALUES ($1, $2, $3, $4, $5, 'sak_live_…abcd', 'ctl:ops', $6) RETURNING id`,
      [scope, agency, scope === 'AGENCY' ? null : sub, `old ${index}`, hashKey(key), index === 1 ? new Date('2029-01-01T00:00:00Z') : null],
    )
    ids.push(row.rows[0].id)
  }
  await client.query(`UPDATE api_keys SET revoked_at = now(), revoked_by = 'user:11111111-1111-4111-8111-111111111111' WHERE id = $1`, [ids[2]])
  const events: Array<[string, string, string]> = [
    [ids[0]!, 'created', 'ctl:ops'],
    [ids[1]!, 'created', 'user:11111111-1111-4111-8111-111111111111'],
    [ids[2]!, 'created', 'api-key:22222222-2222-4222-8222-222222222222'],
    [ids[2]!, 'revoked', 'user:11111111-1111-4111-8111-111111111111'],
    [ids[1]!, 'deleted', 'test'],
  ]
  for (const [keyId, event, actor] of events) {
    await client.query(
      `INSERT INTO api_key_events (key_id, event, actor, scope, agency_id, sub_account_id, key_name, occurred_at)
       SELECT id, $2, $3, scope, agency_id, sub_account_id, name, '2029-06-01T00:00:00Z'::timestamptz + (SELECT count(*) FROM api_key_events) * interval '1 minute' FROM api_keys WHERE id = $1`,
      [keyId, event, actor],
    )
  }
  await client.end()

  t.same(await migrate(url.href), migrationsFrom005(), 'only 005 (and what follows it) is pending, and it applies')
  const pool = createPool(url.href, { max: 2 })
  t.teardown(() => pool.end())

  t.same(
    await lookupKeyByHash(pool, hashKey(plaintexts[1]!)),
    // Its state version (009) starts at 1 for every existing key.
    { status: 'active', tenant: { scope: 'SUB-ACCOUNT', agencyId: agency, subAccountId: sub, keyId: ids[1] }, version: 1 },
    'an existing key reads exactly as before: no expiry, any address',
  )
  t.same(
    await lookupKeyByHash(pool, hashKey(plaintexts[2]!)),
    { status: 'revoked', tenant: { scope: 'SUB-ACCOUNT', agencyId: agency, subAccountId: sub, keyId: ids[2] } },
    'a revoked key reads with its owner (its refusals are counted in its usage)',
  )
  const { rows: keyRows } = await pool.query(
    `SELECT expires_at, allowed_cidrs::text[] AS cidrs, last_used_ip, replaces, replaced_by, last_used_at FROM api_keys WHERE id = $1`,
    [ids[1]],
  )
  t.same(keyRows[0], { expires_at: null, cidrs: [], last_used_ip: null, replaces: null, replaced_by: null, last_used_at: new Date('2029-01-01T00:00:00Z') })

  const { rows: trail } = await pool.query(`SELECT type, actor_kind, actor_id, key_id, key_name, scope, client_address FROM audit_events ORDER BY seq`)
  t.same(trail, [
    { type: 'key.created', actor_kind: 'cli', actor_id: 'ctl:ops', key_id: ids[0], key_name: 'old 0', scope: 'AGENCY', client_address: null },
    {
      type: 'key.created',
      actor_kind: 'user',
      actor_id: '11111111-1111-4111-8111-111111111111',
      key_id: ids[1],
      key_name: 'old 1',
      scope: 'SUB-ACCOUNT',
      client_address: null,
    },
    {
      type: 'key.created',
      actor_kind: 'key',
      actor_id: '22222222-2222-4222-8222-222222222222',
      key_id: ids[2],
      key_name: 'old 2',
      scope: 'SUB-ACCOUNT',
      client_address: null,
    },
    {
      type: 'key.revoked',
      actor_kind: 'user',
      actor_id: '11111111-1111-4111-8111-111111111111',
      key_id: ids[2],
      key_name: 'old 2',
      scope: 'SUB-ACCOUNT',
      client_address: null,
    },
    { type: 'key.deleted', actor_kind: 'cli', actor_id: 'test', key_id: ids[1], key_name: 'old 1', scope: 'SUB-ACCOUNT', client_address: null },
  ])
  const { rows: view } = await pool.query(`SELECT key_id, event, actor FROM api_key_events ORDER BY id`)
  t.same(
    view.map((row) => [row.key_id, row.event, row.actor]),
    events,
    'the old table’s readers read the same rows, actors spelled as before',
  )
  const { rows: times } = await pool.query(`SELECT at FROM audit_events ORDER BY seq`)
  t.same(
    times.map((row) => (row.at as Date).toISOString()),
    ['2029-06-01T00:00:00.000Z', '2029-06-01T00:01:00.000Z', '2029-06-01T00:02:00.000Z', '2029-06-01T00:03:00.000Z', '2029-06-01T00:04:00.000Z'],
    'with their times',
  )
  await t.rejects(pool.query(`DELETE FROM audit_events`), /append-only/)
})

t.test('005 down and up again', async (t) => {
  const url = new URL((await emptyTestDatabase(t)).url)
  await migrate(url.href)
  const client = new pg.Client({ connectionString: url.href })
  await client.connect()
  t.teardown(() => client.end())
  const agency = (await client.query(`INSERT INTO agencies (name) VALUES ('Round trip') RETURNING id`)).rows[0].id as string
  // Since 015 the key's insert writes its event, by the transaction's actor.
  await client.query('BEGIN')
  await client.query(`SELECT set_config('scoped.actor', '{"actor_kind":"cli","actor_id":"ctl:ops"}', true)`)
  await client.query(`INSERT INTO api_keys (scope, agency_id, name, key_hash, hint, created_by) VALUES ('AGENCY', $1, 'k', $2, 'h', 'ctl:ops')`, [
    agency,
    hashKey(generateKey()),
  ])
  await client.query('COMMIT')
  const later = migrationsFrom005()
  const down = await runner({
    dbClient: client,
    dir: migrationsDir,
    direction: 'down',
    migrationsTable: 'schema_migrations',
    count: later.length,
    singleTransaction: true,
    log: () => undefined,
  })
  t.same(
    down.map((migration) => migration.name),
    [...later].reverse(),
    '005 and the migrations after it go down',
  )
  t.same(
    (await client.query(`SELECT event, actor FROM api_key_events`)).rows,
    [{ event: 'created', actor: 'ctl:ops' }],
    'the key events go back to the old table',
  )
  t.same(await migrate(url.href), later)
  t.same((await client.query(`SELECT type, actor_kind, actor_id FROM audit_events`)).rows, [{ type: 'key.created', actor_kind: 'cli', actor_id: 'ctl:ops' }])
})
