/**
 * Key lookups against a large table: BENCH_KEYS rows (default 1 000 000) in
 * api_keys, inserted by one INSERT … SELECT generate_series, then the plan of
 * the gateway's lookup statement (the SQL of lookupKeyByHash, read from
 * shared/src/key-store.ts so it is the one in use) and the latency of 2 000
 * lookups of unknown keys straight through pg, after the table's vacuum and
 * 2 000 untimed lookups. Target: p99 < 2 ms, through the key_hash unique index.
 * The untimed lookups are as many as the timed ones: on a 2-core virtual
 * machine the first thousand or so after the bulk load and its vacuum have a
 * long tail, which a gateway in service has long passed.
 */
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { createPool } from '@scoped/shared/db'
import { lookupKeyByHash } from '@scoped/shared/key-store'
import type { Pool } from '@scoped/shared/db'
import type { Tenant } from './fixtures.js'
import { projectRoot } from '../../test/helpers/processes.js'
import { latency } from './stats.js'
import type { Latency } from './stats.js'

export const LOOKUPS = 2_000
export const WARM_UP_LOOKUPS = 2_000
export const LOOKUP_P99_TARGET_MS = 2

export interface MillionKeys {
  rows: number
  insertSeconds: number
  tableMiB: number
  /** The unique index on api_keys (key_hash), and whether the lookup's plan uses it. */
  index: string
  indexMiB: number
  usesIndex: boolean
  plan: string[]
  lookups: number
  latency: Latency
}

/** The lookup statement of shared/src/key-store.ts (LOOKUP_SQL). */
export function lookupSql(): string {
  const source = readFileSync(join(projectRoot, 'shared/src/key-store.ts'), 'utf8')
  const sql = /const LOOKUP_SQL = `([^`]+)`/.exec(source)?.[1]
  if (sql === undefined) throw new Error('LOOKUP_SQL not found in shared/src/key-store.ts: update scripts/bench/million-keys.ts')
  return sql.trim()
}

async function insertRows(pool: Pool, tenant: Tenant, rows: number): Promise<number> {
  const started = performance.now()
  const client = await pool.connect()
  try {
    await client.query(`SET synchronous_commit = off`)
    await client.query(`SET work_mem = '256MB'`)
    // Bulk load: skip the per-row foreign-key triggers (every row names the one
    // agency and sub-account just created). Needs a superuser; slower without.
    await client.query(`SET session_replication_role = replica`).catch(() => undefined)
    // Distinct hashes no real key has (the SHA-256 of a run salt and a number),
    // inserted in key_hash order with ids in the same order: every index grows
    // at its right edge, which makes the insert several times faster than in
    // random order (the unique index ends up denser, with the same depth).
    await client.query(
      `INSERT INTO api_keys (id, scope, agency_id, sub_account_id, name, key_hash, hint, created_by)
       SELECT ($3 || lpad(to_hex(row_number() OVER (ORDER BY hash)), 12, '0'))::uuid, 'SUB-ACCOUNT', $1, $2, 'bench ' || i, hash,
              'sak_live_…' || right(hash, 4), 'bench'
         FROM (SELECT i, encode(sha256(convert_to($4 || i::text, 'UTF8')), 'hex') AS hash FROM generate_series(1, $5::int) AS i) AS rows
        ORDER BY hash`,
      [tenant.agencyId, tenant.subAccountId, randomBytes(10).toString('hex'), randomBytes(16).toString('hex'), rows],
    )
    await client.query(`RESET session_replication_role`)
    // What a table in service has had long since: its vacuum (otherwise autovacuum starts on the
    // fresh million rows in the middle of the timed lookups), statistics, and a checkpoint behind it.
    await client.query(`VACUUM (ANALYZE) api_keys`)
    await client.query(`CHECKPOINT`).catch(() => undefined)
  } finally {
    client.release()
  }
  return (performance.now() - started) / 1000
}

export async function millionKeys(databaseUrl: string, tenant: Tenant, rows: number): Promise<MillionKeys> {
  const pool = createPool(databaseUrl, { max: 1, applicationName: 'bench' })
  try {
    const insertSeconds = await insertRows(pool, tenant, rows)
    const sizes = await pool.query<{ index: string; table_bytes: string; index_bytes: string }>(
      `SELECT i.indexrelid::regclass::text AS index, pg_table_size('api_keys') AS table_bytes, pg_relation_size(i.indexrelid) AS index_bytes
         FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
        WHERE i.indrelid = 'api_keys'::regclass AND i.indisunique AND i.indnatts = 1 AND a.attname = 'key_hash'`,
    )
    const size = sizes.rows[0]
    if (size === undefined) throw new Error('api_keys has no unique index on key_hash')
    const unknown = (): string => randomBytes(32).toString('hex')
    const explained = await pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) ${lookupSql()}`, [unknown()])
    const plan = explained.rows.map((row) => row['QUERY PLAN'])
    // Untimed: the connection opens, the statement is prepared, the index's inner pages are read in,
    // as they are for a gateway that has been serving.
    for (let i = 0; i < WARM_UP_LOOKUPS; i++) await lookupKeyByHash(pool, unknown())
    const samples = new Float64Array(LOOKUPS)
    for (let i = 0; i < LOOKUPS; i++) {
      const hash = unknown()
      const started = performance.now()
      const state = await lookupKeyByHash(pool, hash)
      samples[i] = performance.now() - started
      if (state.status !== 'unknown') throw new Error(`a random hash was found: ${state.status}`)
    }
    return {
      rows,
      insertSeconds,
      tableMiB: Number(size.table_bytes) / 2 ** 20,
      index: size.index,
      indexMiB: Number(size.index_bytes) / 2 ** 20,
      usesIndex: plan.some((line) => line.includes(`using ${size.index} on api_keys`)),
      plan,
      lookups: LOOKUPS,
      latency: latency(samples),
    }
  } finally {
    await pool.end()
  }
}
