/**
 * Logins in the least-privilege group roles of migration 006, on the test
 * server: `CREATE ROLE <random> LOGIN IN ROLE scoped_gateway`, and its URL to
 * the test database. Roles belong to the whole server, so each is dropped at
 * teardown (after the pools that use it are closed: register it after them,
 * or end them first).
 */
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { serverUrl } from './database.js'
import type { TestDatabase } from './database.js'
import type { Teardown } from './teardown.js'

export type ServiceGroupRole = 'scoped_gateway' | 'scoped_resource' | 'scoped_agency'

async function asAdmin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: serverUrl })
  await client.connect()
  try {
    await client.query(sql)
  } finally {
    await client.end()
  }
}

/** A fresh login that is a member of `group`; answers its name and its URL to `db`. */
export async function createServiceLogin(t: Teardown, db: TestDatabase, group: ServiceGroupRole): Promise<{ name: string; url: string }> {
  const name = `sak_test_${group.replace('scoped_', '')}_${randomBytes(5).toString('hex')}`
  await asAdmin(`CREATE ROLE ${name} LOGIN IN ROLE ${group}`)
  t.teardown(async () => {
    // Sessions that a killed process left behind would block nothing, but end them all the same.
    await asAdmin(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '${name}'`).catch(() => undefined)
    await asAdmin(`DROP ROLE IF EXISTS ${name}`)
  })
  const url = new URL(db.url)
  url.username = name
  return { name, url: url.href }
}
