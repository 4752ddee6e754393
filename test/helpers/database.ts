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

async function admin<T>(server: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: server })
  await client.connect()
  try {
    return await work(client)
  } finally {
    await client.end()
  }
}

export interface TemporaryDatabase {
  name: string
  url: string
  /** Drops it, ending whatever connections are still open to it. */
  drop(): Promise<void>
}

/** An empty database of its own on the server at `server` (the tests' and the benchmark's), named `<prefix>_<random>`. */
export async function temporaryDatabase(server: string, prefix: string): Promise<TemporaryDatabase> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`
  await admin(server, (client) => client.query(`CREATE DATABASE ${name}`))
  const url = new URL(server)
  url.pathname = `/${name}`
  return { name, url: url.href, drop: () => admin(server, (client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined) }
}

/** An empty database, not migrated (for tests of the migrations themselves), dropped at teardown. */
export async function emptyTestDatabase(t: Teardown): Promise<TemporaryDatabase> {
  const database = await temporaryDatabase(serverUrl, 'sak_test')
  t.teardown(() => database.drop())
  return database
}

/** A migrated database with a pool, both gone at teardown. */
export async function createTestDatabase(t: Teardown): Promise<TestDatabase> {
  const database = await temporaryDatabase(serverUrl, 'sak_test')
  await migrate(database.url)
  const pool = createPool(database.url, { max: 5, applicationName: 'scoped-api-test' })
  t.teardown(async () => {
    await pool.end()
    await database.drop()
  })
  return { name: database.name, url: database.url, pool }
}
