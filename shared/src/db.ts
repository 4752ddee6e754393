/** The Postgres pool every service uses. */
import pg from 'pg'

export type Pool = pg.Pool
export type PoolClient = pg.PoolClient

export interface PoolOptions {
  max?: number
  applicationName?: string
}

export function createPool(databaseUrl: string, options: PoolOptions = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: options.max ?? 10,
    application_name: options.applicationName ?? 'scoped-api',
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
    // A connection whose peer vanished (a Postgres host lost, a partition) is found dead by TCP keepalive
    // instead of holding its pool slot until the kernel gives up on it.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    // No JIT on any connection (a startup option, so no extra statement): every statement here is short, and
    // LLVM's compiling of one whose estimates looked large (a usage batch's unnest, a report's histograms) took
    // far longer than running it.
    options: '-c jit=off',
  })
  // An idle client that loses its connection emits here; without a listener the process would crash.
  pool.on('error', () => undefined)

  return pool
}

/**
 * Runs `work` in one transaction on one client. Every query of the
 * transaction goes through the given client (never the pool), which also
 * keeps it correct on the embedded Postgres, where a transaction held on one
 * connection blocks queries from every other.
 */
export async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect()
  try {
    await client.query('BEGIN')
    const result = await work(client)
    await client.query('COMMIT')
    return result
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined)
    throw error
  } finally {
    client.release()
  }
}

const IDENTIFIER = /^[a-z_]+$/

/**
 * A table or column name to put into SQL text, checked to be a plain
 * identifier. Such names come from this code base, never from a request;
 * the check makes a slip fail loudly instead of becoming injectable SQL.
 */
export function sqlIdentifier(name: string): string {
  if (!IDENTIFIER.test(name)) throw new Error(`not a plain SQL identifier: ${name}`)
  return name
}

export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID_PATTERN.test(value)
}

/** Postgres error codes we react to; anything else is an infrastructure failure. */
export const pgErrorCodes = {
  uniqueViolation: '23505',
  foreignKeyViolation: '23503',
  /** A statement names a column the database does not have (yet). */
  undefinedColumn: '42703',
  /** A statement names a table the database does not have (yet). */
  undefinedTable: '42P01',
  /** "cached plan must not change result type": a prepared statement outlived a change of what it returns. */
  cachedPlanChanged: '0A000',
  /** A named prepared statement of that name exists already: on one session shared by several connections, another's. */
  duplicatePreparedStatement: '42P05',
} as const

export function pgErrorCode(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string' ? error.code : undefined
}
