/**
 * The audit trail is complete by construction (migration 015), seen through
 * agency-service's own database login as a psql session would use it: a key
 * inserted or changed directly leaves an `unattributed` event with the
 * before and after of what changed (never a hash), a last-use write leaves
 * none, the login cannot insert into the trail, a declared `user.signed-in`
 * with no session behind it writes nothing, and writers of one agency racing
 * each other keep one chain.
 */
import t from 'tap'
import type { Test } from 'tap'
import { createPool } from '@scoped/shared/db'
import type { Pool } from '@scoped/shared/db'
import { generateKey, hashKey, keyHint } from '@scoped/shared/keys'
import { verifyAuditChain } from '@scoped/agency-service/audit/audit-chain'
import { createTestDatabase } from '../helpers/database.js'
import type { TestDatabase } from '../helpers/database.js'
import { createServiceLogin } from '../helpers/database-roles.js'

interface EventRow {
  type: string
  actor_kind: string
  actor_id: string
  key_name: string | null
  changes: Record<string, { before: unknown; after: unknown }> | null
  database_login: string
}

async function agencyLogin(t: Test, db: TestDatabase): Promise<{ name: string; pool: Pool }> {
  const login = await createServiceLogin(t, db, 'scoped_agency')
  const pool = createPool(login.url, { max: 8, applicationName: 'scoped-api-test' })
  t.teardown(() => pool.end())
  return { name: login.name, pool }
}

async function newAgency(db: TestDatabase, name: string): Promise<string> {
  return (await db.pool.query<{ id: string }>(`INSERT INTO agencies (name) VALUES ($1) RETURNING id`, [name])).rows[0]!.id
}

async function events(db: TestDatabase, agencyId: string): Promise<EventRow[]> {
  const { rows } = await db.pool.query<EventRow>(
    `SELECT type, actor_kind, actor_id, key_name, changes, database_login FROM audit_events WHERE agency_id = $1 ORDER BY chain_seq`,
    [agencyId],
  )
  return rows
}

function insertKey(pool: Pool, agencyId: string, name: string): Promise<{ rows: { id: string }[] }> {
  const key = generateKey()
  return pool.query<{ id: string }>(
    `INSERT INTO api_keys (scope, agency_id, name, key_hash, hint, created_by) VALUES ('AGENCY', $1, $2, $3, $4, 'psql') RETURNING id`,
    [agencyId, name, hashKey(key), keyHint(key)],
  )
}

t.test('a change made with the service login outside the service is recorded, unattributed', async (t) => {
  const db = await createTestDatabase(t)
  const agency = await agencyLogin(t, db)
  const agencyId = await newAgency(db, 'Direct')

  const inserted = await insertKey(agency.pool, agencyId, 'planted')
  const keyId = inserted.rows[0]!.id
  await agency.pool.query(`UPDATE api_keys SET allowed_cidrs = '{10.0.0.0/8}' WHERE id = $1`, [keyId])
  await agency.pool.query(`UPDATE api_keys SET last_used_at = now(), last_used_ip = '10.1.2.3' WHERE id = $1`, [keyId])

  const trail = await events(db, agencyId)
  t.same(
    trail.map(({ type, actor_kind, actor_id, key_name, database_login }) => ({ type, actor_kind, actor_id, key_name, database_login })),
    [
      { type: 'key.created', actor_kind: 'unattributed', actor_id: agency.name, key_name: 'planted', database_login: agency.name },
      { type: 'key.updated', actor_kind: 'unattributed', actor_id: agency.name, key_name: 'planted', database_login: agency.name },
    ],
    'the insert and the allowlist change each left an event naming the login; the last-use write left none',
  )
  t.same(trail[1]!.changes, { allowed_cidrs: { before: [], after: ['10.0.0.0/8'] } }, 'the update carries the before and after of what changed')
  t.notOk(JSON.stringify(trail).includes('key_hash'), 'never a hash')
})

t.test('the service login cannot write the trail itself, and a sign-in needs its session', async (t) => {
  const db = await createTestDatabase(t)
  const agency = await agencyLogin(t, db)
  const agencyId = await newAgency(db, 'Forged')
  const user = (await db.pool.query<{ id: string }>(`INSERT INTO users (email, password_hash) VALUES ('eve@example.test', 'x') RETURNING id`)).rows[0]!
  await db.pool.query(`INSERT INTO agency_memberships (user_id, agency_id, role) VALUES ($1, $2, 'owner')`, [user.id, agencyId])
  const before = (await events(db, agencyId)).length

  await t.rejects(
    agency.pool.query(
      `INSERT INTO audit_events (type, actor_kind, actor_id, agency_id, user_id, user_email) VALUES ('user.signed-in', 'user', $1, $2, $3, 'eve@example.test')`,
      [user.id, agencyId, user.id],
    ),
    { code: '42501' },
    'a forged user.signed-in is refused: the login has no INSERT on the trail',
  )
  const forged = {
    type: 'user.signed-in',
    actor_kind: 'user',
    actor_id: user.id,
    agency_id: agencyId,
    user_id: user.id,
    user_email: 'eve@example.test',
    role: 'owner',
  }
  await agency.pool.query(`SELECT audit_declare($1::jsonb)`, [JSON.stringify(forged)])
  t.equal((await events(db, agencyId)).length, before, 'a declared sign-in with no session row behind it writes nothing')

  await agency.pool.query(
    `INSERT INTO console_sessions (token_hash, user_id, csrf_token, created_at, last_seen_at, expires_at)
     VALUES (repeat('a', 64), $1, repeat('c', 32), now(), now(), now() + interval '1 hour')`,
    [user.id],
  )
  const after = await events(db, agencyId)
  t.same(
    after.slice(before).map(({ type, actor_kind }) => ({ type, actor_kind })),
    [{ type: 'user.signed-in', actor_kind: 'unattributed' }],
    'a session row is a sign-in, recorded with it',
  )
})

t.test('writers of one agency racing each other keep one chain', async (t) => {
  const db = await createTestDatabase(t)
  const agency = await agencyLogin(t, db)
  const agencyId = await newAgency(db, 'Race')
  const writers = 16
  await Promise.all(Array.from({ length: writers }, (_, index) => insertKey(agency.pool, agencyId, `racer ${index}`)))
  const { rows } = await db.pool.query<{ chain_seq: string }>(`SELECT chain_seq FROM audit_events WHERE agency_id = $1 ORDER BY chain_seq`, [agencyId])
  t.same(
    rows.map((row) => Number(row.chain_seq)),
    Array.from({ length: writers }, (_, index) => index + 1),
    'one place each, no gap, no fork',
  )
  t.same(await verifyAuditChain(db.pool, agencyId), { agencyId, events: writers, ok: true }, 'and the chain verifies')
})
