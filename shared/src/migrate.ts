/**
 * Versioned schema migrations (node-pg-migrate, plain SQL files in
 * shared/migrations). Services and `npm start` apply them at start; the
 * advisory lock in "wait" mode makes concurrent starts safe: one applies,
 * the others wait and then find nothing pending.
 */
import { fileURLToPath } from 'node:url'
import { runner } from 'node-pg-migrate'
import pg from 'pg'

export const migrationsDir = fileURLToPath(new URL('../migrations', import.meta.url))

export async function migrate(databaseUrl: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'scoped-api-migrate' })
  await client.connect()
  try {
    const applied = await runner({
      dbClient: client,
      dir: migrationsDir,
      direction: 'up',
      migrationsTable: 'schema_migrations',
      count: Infinity,
      advisoryLockMode: 'wait',
      singleTransaction: true,
      log: () => undefined,
    })
    return applied.map((migration) => migration.name)
  } finally {
    await client.end()
  }
}
