/**
 * The embedded Postgres of `npm start` is one session shared by every
 * connection. What the services need of it, checked on it directly (PGlite
 * behind the session queue, scripts/pglite-session-queue.ts), with several
 * pools at once as the gateway, the services and ctl have: statements of
 * different connections never mix, a transaction is never entered by another
 * connection, a connection that dies inside one leaves nothing behind,
 * migrations started together apply once, and key lookups never collide on
 * the prepared statement's name (issue 33: 503 for new keys on first use).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import t from 'tap'
import { createPool } from '@scoped/shared/db'
import type { Pool } from '@scoped/shared/db'
import { knownMigrations, migrate } from '@scoped/shared/migrate'
import { generateKey, hashKey, keyHint } from '@scoped/shared/keys'
import { lookupKeyByHash } from '@scoped/shared/key-store'
import { startEmbeddedPostgres } from '../../scripts/embedded-postgres.js'
import { freePort } from '../helpers/processes.js'

const dataRoot = mkdtempSync(join(tmpdir(), 'sak-embedded-'))
t.teardown(() => rmSync(dataRoot, { recursive: true, force: true }))
const embedded = await startEmbeddedPostgres(dataRoot, await freePort())
t.teardown(() => embedded.stop())

const pools: Pool[] = []
function pool(max = 4): Pool {
  const created = createPool(embedded.url, { max })
  pools.push(created)
  return created
}
t.teardown(() => Promise.all(pools.map((each) => each.end())))

t.test('migrations started together are applied once, and every migrator succeeds', async (t) => {
  const results = await Promise.all([migrate(embedded.url), migrate(embedded.url), migrate(embedded.url)])
  t.same(results.flat().sort(), knownMigrations(), 'each migration applied by exactly one of them')
  t.equal(results.filter((applied) => applied.length > 0).length, 1, 'one migrator applied them all, in one transaction')
  t.same(await migrate(embedded.url), [], 'nothing left to apply')
})

t.test('statements of different connections never mix', async (t) => {
  const pools3 = [pool(), pool(), pool()]
  // Unnamed statements with parameters from many connections at once: each answer is its own query's.
  const answers = await Promise.all(
    Array.from({ length: 120 }, (_, i) => pools3[i % 3]!.query<{ n: number; text: string }>('SELECT $1::int AS n, $2::text AS text', [i, `q${i}`])),
  )
  answers.forEach((answer, i) => t.same(answer.rows, [{ n: i, text: `q${i}` }], `query ${i}`))
})

t.test('a transaction on one connection is never entered by another', async (t) => {
  const db = pool()
  await db.query('CREATE TABLE IF NOT EXISTS session_probe (n int)')
  const holder = await db.connect()
  await holder.query('BEGIN')
  await holder.query('INSERT INTO session_probe VALUES (1)')
  // Another connection's statement waits for the transaction to end, instead of running inside it.
  const outside = db.query<{ count: number }>('SELECT count(*)::int AS count FROM session_probe')
  let settled = false
  void outside.then(() => (settled = true))
  await new Promise((resolve) => setTimeout(resolve, 200))
  t.equal(settled, false, 'the other connection waits while the transaction is open')
  await holder.query('ROLLBACK')
  holder.release()
  t.same((await outside).rows, [{ count: 0 }], 'and then sees nothing of the rolled-back transaction')
})

t.test('a connection that goes away inside a transaction leaves nothing behind', async (t) => {
  const client = new pg.Client({ connectionString: embedded.url })
  client.on('error', () => undefined) // its connection is cut below, on purpose
  await client.connect()
  await client.query('BEGIN')
  await client.query('INSERT INTO session_probe VALUES (2)')
  const others = pool()
  const waiting = others.query<{ count: number }>('SELECT count(*)::int AS count FROM session_probe')
  client.connection.stream.destroy()
  t.same((await waiting).rows, [{ count: 0 }], 'rolled back, and the others go on')
})

t.test('key lookups from several pools at once: never a collision on the prepared statement', async (t) => {
  const owner = pool()
  const { rows } = await owner.query<{ id: string }>(`INSERT INTO agencies (name) VALUES ('Embedded') RETURNING id`)
  const agencyId = rows[0]!.id
  const keys = Array.from({ length: 12 }, () => generateKey())
  for (const [i, key] of keys.entries()) {
    await owner.query(`INSERT INTO api_keys (name, scope, agency_id, key_hash, hint, created_by) VALUES ($1, 'AGENCY', $2, $3, $4, 'test')`, [
      `key ${i}`,
      agencyId,
      hashKey(key),
      keyHint(key),
    ])
  }
  // Three "gateways", each with its own pool, looking every key up at once, twice over.
  const gateways = [pool(5), pool(5), pool(5)]
  const lookups = gateways.flatMap((gateway) => [...keys, ...keys].map((key) => lookupKeyByHash(gateway, hashKey(key))))
  const states = await Promise.allSettled(lookups)
  const failed = states.filter((state) => state.status === 'rejected')
  t.same(
    failed.map((state) => String(state.reason)),
    [],
    'no lookup failed',
  )
  t.ok(
    states.every((state) => state.status === 'fulfilled' && state.value.status === 'active'),
    'every key is found active',
  )
})
