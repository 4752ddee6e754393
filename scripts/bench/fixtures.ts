/**
 * What the benchmark runs against: a temporary database (created on the
 * Postgres server of DATABASE_URL, default postgres://postgres@127.0.0.1:5432,
 * and dropped at the end, so no existing database is written to), Redis
 * under a fresh key prefix (removed at the end), one agency and sub-account,
 * keys inserted straight into api_keys, and a self-signed certificate.
 */
import { Redis } from 'ioredis'
import { makeCertificate } from '../../test/helpers/https.js'
import { temporaryDatabase as createDatabase } from '../../test/helpers/database.js'
import type { TemporaryDatabase } from '../../test/helpers/database.js'
import type { Pool } from '@scoped/shared/db'
import { hashKey, keyHint } from '@scoped/shared/keys'

export type Database = TemporaryDatabase

export async function temporaryDatabase(): Promise<Database> {
  const server = process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/postgres'
  return createDatabase(server, 'sak_bench').catch((error: unknown) => {
    throw new Error(`the benchmark needs Postgres: set DATABASE_URL or run one on 127.0.0.1:5432 (${String(error)})`, { cause: error })
  })
}

export async function connectRedis(url: string): Promise<Redis> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 })
  await redis.connect().catch((error: unknown) => {
    throw new Error(`the benchmark needs Redis: set REDIS_URL or run one on 127.0.0.1:6379 (${String(error)})`, { cause: error })
  })
  return redis
}

export { clearPrefix } from '../../test/helpers/redis.js'

export interface Tenant {
  agencyId: string
  subAccountId: string
}

export async function createTenant(pool: Pool): Promise<Tenant> {
  const agency = await pool.query<{ id: string }>(`INSERT INTO agencies (name) VALUES ('Bench Agency') RETURNING id`)
  const agencyId = agency.rows[0]!.id
  const sub = await pool.query<{ id: string }>(`INSERT INTO sub_accounts (agency_id, name) VALUES ($1, 'Bench Sub-account') RETURNING id`, [agencyId])
  return { agencyId, subAccountId: sub.rows[0]!.id }
}

/**
 * Inserts SUB-ACCOUNT keys of the tenant's sub-account, straight into the
 * table: the limit of 25 active keys is the key service's, not the table's.
 */
/** `permissions`: a restricted key's list (null: unrestricted, as every key before migration 016). */
export async function insertKeys(pool: Pool, tenant: Tenant, keys: readonly string[], name: string, permissions: string[] | null = null): Promise<void> {
  await pool.query(
    `INSERT INTO api_keys (scope, agency_id, sub_account_id, name, key_hash, hint, created_by, permissions)
     SELECT 'SUB-ACCOUNT', $1, $2, $3, h.hash, h.hint, 'bench', $6::text[] FROM unnest($4::text[], $5::text[]) AS h(hash, hint)`,
    [tenant.agencyId, tenant.subAccountId, name, keys.map(hashKey), keys.map(keyHint), permissions],
  )
}

export type Certificate = Pick<Awaited<ReturnType<typeof makeCertificate>>, 'certFile' | 'keyFile'>

/** One self-signed certificate for every TLS target (bare proxy, gateway, nginx): the tests' own. */
export const certificate = (dir: string): Promise<Certificate> => makeCertificate(dir)
