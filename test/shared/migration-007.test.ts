/**
 * Migration 007 (a key's own rate limit): the two columns are both set or
 * both null, within the routes file's bounds; a change of the limit is a
 * `changed` entry in the invalidation log (written as the owner, whoever
 * updates the key), and nothing else is; the gateway's role reads the limit;
 * and a gateway started before the migration waits for it.
 */
import t from 'tap'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { TenantStore } from '@scoped/agency-service/tenants'
import { createPool } from '@scoped/shared/db'
import type { Pool } from '@scoped/shared/db'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { keySchemaMissing, lookupKeyByHash } from '@scoped/shared/key-store'
import { hashKey } from '@scoped/shared/keys'
import { createLogger } from '@scoped/shared/logger'
import { waitForKeySchema } from '@scoped/gateway/key-layer'
import { createServiceLogin } from '../helpers/database-roles.js'
import type { TestDatabase } from '../helpers/database.js'
import { createTestDatabase } from '../helpers/database.js'

const CHECK_VIOLATION = '23514'

async function seedKey(db: TestDatabase): Promise<{ id: string; hash: string }> {
  const tenants = new TenantStore(db.pool)
  const agency = await tenants.createAgency('Limits')
  const sub = await tenants.createSubAccount(agency.id, 'Limits West')
  const created = await new KeyService(db.pool, new KeyRevocationNotifier(db.pool, null)).create({ scope: 'SUB-ACCOUNT', subAccountId: sub.id }, 'k', 'test')
  return { id: created.id, hash: hashKey(created.key) }
}

/** The SQLSTATE a statement fails with, or 'ok'. */
async function outcome(pool: Pool, sql: string, values: unknown[]): Promise<string> {
  try {
    await pool.query(sql, values)
    return 'ok'
  } catch (error) {
    return (error as { code?: string }).code ?? String(error)
  }
}

t.test('both or neither, within the bounds of the routes file; the lookup reads them', async (t) => {
  const db = await createTestDatabase(t)
  const key = await seedKey(db)
  t.notOk('rateLimit' in (await lookupKeyByHash(db.pool, key.hash)), 'a key without its own limit reads as before 007')

  const rows: Array<[string, unknown, unknown, string]> = [
    ['a rate without a burst', 5, null, CHECK_VIOLATION],
    ['a burst without a rate', null, 5, CHECK_VIOLATION],
    ['a rate of 0', 0, 5, CHECK_VIOLATION],
    ['a negative rate', -1, 5, CHECK_VIOLATION],
    ['a rate above 1000000', 1_000_001, 5, CHECK_VIOLATION],
    ['a rate of NaN', 'NaN', 5, CHECK_VIOLATION],
    ['an infinite rate', 'Infinity', 5, CHECK_VIOLATION],
    ['a burst of 0', 5, 0, CHECK_VIOLATION],
    ['a burst above 10000000', 5, 10_000_001, CHECK_VIOLATION],
    ['the smallest limit', 0.001, 1, 'ok'],
    ['the largest limit', 1_000_000, 10_000_000, 'ok'],
    ['neither: the route defaults', null, null, 'ok'],
    ['a fractional rate', 0.05, 2, 'ok'],
  ]
  for (const [name, rate, burst, expected] of rows) {
    t.equal(
      await outcome(db.pool, `UPDATE api_keys SET rate_limit_rate = $2::float8, rate_limit_burst = $3 WHERE id = $1`, [key.id, rate, burst]),
      expected,
      name,
    )
  }
  t.match(await lookupKeyByHash(db.pool, key.hash), { status: 'active', rateLimit: { rate: 0.05, burst: 2 } }, 'the rate exactly as stored')
})

t.test('a change of the limit is a `changed` invalidation, written as the owner for agency-service’s role; nothing else is', async (t) => {
  const db = await createTestDatabase(t)
  const key = await seedKey(db)
  const [agencyLogin, gatewayLogin] = [await createServiceLogin(t, db, 'scoped_agency'), await createServiceLogin(t, db, 'scoped_gateway')]
  const agency = createPool(agencyLogin.url, { max: 1, applicationName: 'scoped-api-test' })
  const gateway = createPool(gatewayLogin.url, { max: 1, applicationName: 'scoped-api-test' })
  t.teardown(() => Promise.all([agency.end(), gateway.end()]))
  const changes = async (): Promise<number> =>
    (await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM key_invalidations WHERE key_hash = $1 AND state = 'changed'`, [key.hash])).rows[0]!.n

  const set = (pool: Pool, rate: number | null, burst: number | null) =>
    outcome(pool, `UPDATE api_keys SET rate_limit_rate = $2, rate_limit_burst = $3 WHERE id = $1`, [key.id, rate, burst])
  t.equal(await set(agency, 5, 10), 'ok', 'agency-service’s role sets a limit')
  t.equal(await changes(), 1, 'one `changed` entry, though that role cannot write the log itself')
  t.equal(await set(agency, 5, 10), 'ok')
  t.equal(await changes(), 1, 'the same limit again: no entry')
  t.equal(await set(agency, 5, 11), 'ok')
  t.equal(await changes(), 2, 'a new burst alone: an entry')
  t.equal(await set(agency, 6, 11), 'ok')
  t.equal(await changes(), 3, 'a new rate alone: an entry')
  t.match(await lookupKeyByHash(gateway, key.hash), { status: 'active', rateLimit: { rate: 6, burst: 11 } }, 'the gateway’s role reads the limit')
  t.equal(await outcome(gateway, `UPDATE api_keys SET last_used_at = now() WHERE id = $1`, [key.id]), 'ok', 'the gateway’s role still writes last use')
  t.equal(await changes(), 3, 'and that is no change of the key')
  t.equal(await set(gateway, 1000, 1000), '42501', 'the gateway’s role cannot change a limit')
  t.equal(await set(agency, null, null), 'ok', 'back to the route defaults')
  t.equal(await changes(), 4)
  const { rows } = await db.pool.query<{ definer: boolean; config: string[] | null }>(
    `SELECT prosecdef AS definer, proconfig AS config FROM pg_proc WHERE proname = 'api_keys_record_invalidation'`,
  )
  t.equal(rows[0]!.definer, true, 'the trigger function still runs as the owner (006)')
  t.match(rows[0]!.config, [/^search_path=/], 'with its fixed search_path')
})

t.test('a gateway started before 007 was applied waits for it, then fails naming what is missing', async (t) => {
  const db = await createTestDatabase(t)
  const lines: string[] = []
  const log = createLogger('gateway', 'info', { write: (line: string) => lines.push(line) })
  t.equal(await keySchemaMissing(db.pool), undefined, 'a migrated database has what the lookup reads')
  await db.pool.query(`ALTER TABLE api_keys DROP COLUMN rate_limit_burst`)
  t.match(await keySchemaMissing(db.pool), /rate_limit_burst/, 'what is missing, in Postgres’ words')
  await t.rejects(
    waitForKeySchema(db.pool, log, 50, 10),
    /the database lacks what the key lookup reads \(.*rate_limit_burst.*\): run `ctl migrate` as the schema owner/,
    'after the wait: an error naming the column and what to do',
  )
  t.match(lines.join(''), /waiting for the migration job/, 'told once that it waits')

  const waiting = waitForKeySchema(db.pool, log, 20_000, 10)
  await db.pool.query(`ALTER TABLE api_keys ADD COLUMN rate_limit_burst integer`)
  await waiting
  t.pass('it goes on once the column is there')
})
