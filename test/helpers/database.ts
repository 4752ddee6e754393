/**
 * A Postgres database of its own for one test file: created on the local
 * server (TEST_POSTGRES_URL, default postgres://postgres@127.0.0.1:5432),
 * migrated, and dropped at teardown.
 */
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { createPool } from '@scoped/shared/db'
import type { Pool } from '@scoped/shared/db'
import { migrate } from '@scoped/shared/migrate'
import type { Teardown } from './teardown.js'

export const serverUrl = process.env['TEST_POSTGRES_URL'] ?? 'postgres://postgres@127.0.0.1:5432/postgres'

export interface TestDatabase {
  name: string
  url: string
  pool: Pool
}

async function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: serverUrl })
  await client.connect()
  try {
    return await work(client)
  } finally {
    await client.end()
  }
}

export async function createTestDatabase(t: Teardown): Promise<TestDatabase> {
  const name = `sak_test_${randomBytes(6).toString('hex')}`
  await admin((client) => client.query(`CREATE DATABASE ${name}`))
  const url = new URL(serverUrl)
  url.pathname = `/${name}`
  await migrate(url.href)
  const pool = createPool(url.href, { max: 5, applicationName: 'scoped-api-test' })
  t.teardown(async () => {
    await pool.end()
    await admin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
  })
  return { name, url: url.href, pool }
}
