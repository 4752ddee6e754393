/**
 * Versioned schema migrations (node-pg-migrate, plain SQL files in
 * shared/migrations). The role that applies them owns the schema; services
 * that connect as a least-privilege role (migration 006, "Database roles" in
 * docs/operations.md) cannot, and wait for them instead (migrateOrWait).
 *
 * Services, `ctl` and `npm start` apply them at start when their role may;
 * one transaction per migrator, under an advisory lock, makes concurrent
 * starts safe (migrate): one applies, the others wait and then find nothing
 * pending.
 */
import { readdirSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { PG_MIGRATE_LOCK_ID, runner } from 'node-pg-migrate'
import pg from 'pg'

export const migrationsDir = fileURLToPath(new URL('../migrations', import.meta.url))

const MIGRATIONS_TABLE = 'schema_migrations'

/** The names of the migrations this build knows, in order (file names without extension). */
export function knownMigrations(): string[] {
  return readdirSync(migrationsDir)
    .filter((file) => /^\d+_[a-z0-9_]+\.sql$/.test(file))
    .map((file) => file.replace(/\.sql$/, ''))
    .sort()
}

/** Thrown when the connected role may not change the schema (a service's least-privilege role). */
export class NotSchemaOwnerError extends Error {
  constructor() {
    super(
      'this database role cannot apply migrations (it is not the schema owner): run `ctl migrate` with the DATABASE_URL of the migrating role (docs/operations.md, "Database roles")',
    )
    this.name = 'NotSchemaOwnerError'
  }
}

/**
 * Whether the connected role may apply migrations: a member of the owner of
 * the migrations table, or, on a database that has none yet, a role that may
 * create in the current schema.
 */
async function canMigrate(client: pg.Client): Promise<boolean> {
  const { rows } = await client.query<{ can: boolean }>(
    `SELECT CASE WHEN to_regclass($1) IS NULL THEN coalesce(has_schema_privilege(current_schema(), 'CREATE'), false)
                 ELSE pg_has_role((SELECT relowner FROM pg_class WHERE oid = to_regclass($1)), 'MEMBER') END AS can`,
    [MIGRATIONS_TABLE],
  )
  return rows[0]?.can === true
}

/** Known migrations that the database has not applied. */
async function pendingOn(client: pg.Client): Promise<string[]> {
  const { rows } = await client.query<{ exists: boolean }>(`SELECT to_regclass($1) IS NOT NULL AS exists`, [MIGRATIONS_TABLE])
  const applied = new Set<string>()
  if (rows[0]?.exists === true) {
    for (const row of (await client.query<{ name: string }>(`SELECT name FROM ${MIGRATIONS_TABLE}`)).rows) applied.add(row.name)
  }
  return knownMigrations().filter((name) => !applied.has(name))
}

async function withClient<T>(databaseUrl: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'scoped-api-migrate' })
  await client.connect()
  try {
    return await work(client)
  } finally {
    await client.end()
  }
}

/**
 * Applies every pending migration; refuses (NotSchemaOwnerError) when the
 * role may not. Everything happens in one transaction, from the lock to the
 * last migration: on Postgres the transaction-level advisory lock makes a
 * second migrator wait, then read the migrations table afresh; on the
 * embedded Postgres, one session shared by every connection, where any
 * advisory lock is granted at once, the session queue runs one transaction at
 * a time, which serializes them all the same. node-pg-migrate's own BEGIN
 * inside it is a no-op (a warning) and its COMMIT ends it; its session-level
 * lock is not taken.
 */
export async function migrate(databaseUrl: string): Promise<string[]> {
  return withClient(databaseUrl, async (client) => {
    await client.query('BEGIN')
    try {
      if (!(await canMigrate(client))) throw new NotSchemaOwnerError()
      await client.query('SELECT pg_advisory_xact_lock($1)', [PG_MIGRATE_LOCK_ID])
      const applied = await runner({
        dbClient: client,
        dir: migrationsDir,
        direction: 'up',
        migrationsTable: MIGRATIONS_TABLE,
        count: Infinity,
        noLock: true,
        singleTransaction: true,
        log: () => undefined,
      })
      // Ends the transaction when nothing was pending (otherwise the runner's COMMIT did).
      await client.query('COMMIT')
      return applied.map((migration) => migration.name)
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined)
      throw error
    }
  })
}

export interface MigrateOrWaitOptions {
  /** How long a role that cannot migrate waits for the schema owner to apply what is pending; 0: not at all. */
  waitMs: number
  /** Told once what is pending, when waiting starts. */
  onWait?: (pending: string[]) => void
  pollMs?: number
}

/**
 * At a service's (or ctl's) start: applies pending migrations when the
 * connected role owns the schema (as before least privilege); otherwise waits
 * until the migration job has applied them, up to `waitMs`, then fails with a
 * message naming what is missing. Answers the migrations it applied.
 */
export async function migrateOrWait(databaseUrl: string, options: MigrateOrWaitOptions): Promise<string[]> {
  const owner = await withClient(databaseUrl, canMigrate)
  if (owner) return migrate(databaseUrl)
  const deadline = Date.now() + options.waitMs
  let told = false
  for (;;) {
    const pending = await withClient(databaseUrl, pendingOn)
    if (pending.length === 0) return []
    if (Date.now() >= deadline) {
      throw new Error(
        `the database lacks migrations ${pending.join(', ')}, and this role cannot apply them: run \`ctl migrate\` as the schema owner (docs/operations.md, "Database roles")`,
      )
    }
    if (!told) options.onWait?.(pending)
    told = true
    await new Promise((resolve) => setTimeout(resolve, options.pollMs ?? 1000))
  }
}
