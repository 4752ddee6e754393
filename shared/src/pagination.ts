/**
 * Keyset (cursor) pagination, the same for every list of the API.
 *
 * Lists are ordered by (created_at, id) ascending (a list that says so, the
 * audit trail, by its own time column and newest first), and a cursor is the
 * position of the last row of a page: rows inserted while a client walks a
 * list land after the rows that existed already, so a walk never loses or
 * repeats one. The position keeps created_at to the microsecond (a
 * JavaScript Date would cut it to the millisecond and skip or repeat rows);
 * the cursor is opaque to clients: base64url of `<microseconds>.<id>`.
 */
import type { FastifyRequest } from 'fastify'
import { ApiError } from './errors.js'
import type { Pool } from './db.js'
import { isUuid, sqlIdentifier } from './db.js'

export const DEFAULT_PAGE_LIMIT = 20
export const MAX_PAGE_LIMIT = 100

export interface ListQuery {
  limit: number
  cursor?: string
}

/** Query schema of every list; unknown parameters are refused like unknown body fields. */
export const listQuerySchema = {
  type: 'object',
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: MAX_PAGE_LIMIT, default: DEFAULT_PAGE_LIMIT },
    cursor: { type: 'string', minLength: 1, maxLength: 200 },
  },
  additionalProperties: false,
} as const

/**
 * The backends validate without type coercion (so a body's `"name": 123` is
 * refused rather than turned into "123"); a query string is text, so the
 * limit alone is read as a number here, and only when it is plain digits.
 */
export async function readLimitAsNumber(request: FastifyRequest): Promise<void> {
  const query = request.query as Record<string, unknown> | undefined
  if (query !== undefined && typeof query['limit'] === 'string' && /^[0-9]{1,6}$/.test(query['limit'])) {
    query['limit'] = Number(query['limit'])
  }
}

/** Where a page ends: created_at in microseconds since the epoch (as text, beyond 2^53) and the row id. */
export interface Position {
  micros: string
  id: string
}

export function encodeCursor(position: Position): string {
  return Buffer.from(`${position.micros}.${position.id}`, 'utf8').toString('base64url')
}

const CURSOR_PATTERN = /^([0-9]{1,17})\.([0-9a-f-]{36})$/

/** Reads a cursor; anything that is not one this API issued is a 400. */
export function decodeCursor(cursor: string): Position {
  const invalid = new ApiError('badRequest', 'querystring.cursor is not a valid cursor')
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw invalid
  const match = CURSOR_PATTERN.exec(Buffer.from(cursor, 'base64url').toString('utf8'))
  if (match === null || !isUuid(match[2])) throw invalid
  const position = { micros: match[1]!, id: match[2]! }
  // Only the canonical spelling is accepted, so one position has one cursor.
  if (encodeCursor(position) !== cursor) throw invalid
  return position
}

/** SQL for a row's position by its time column; select it as `position` alongside the row. */
function positionSql(timeColumn: string): string {
  return `(extract(epoch FROM ${sqlIdentifier(timeColumn)}) * 1000000)::bigint::text`
}

/**
 * SQL condition for "after the cursor" in list order, with the microseconds
 * and the id as parameters $m and $i; the row comparison is served by an
 * index on (tenant, time, id).
 */
function afterPositionSql(timeColumn: string, order: 'asc' | 'desc', microsParameter: number, idParameter: number): string {
  return `(${sqlIdentifier(timeColumn)}, id) ${order === 'asc' ? '>' : '<'} (timestamptz 'epoch' + $${microsParameter}::bigint * interval '1 microsecond', $${idParameter}::uuid)`
}

export interface Page<T> {
  success: true
  data: T[]
  pagination: { limit: number; nextCursor: string | null; hasMore: boolean }
}

/**
 * Builds a page from rows fetched with LIMIT limit + 1: the extra row, if
 * any, only says that there is more.
 */
function toPage<Row extends { id: string; position: string }, T>(rows: readonly Row[], limit: number, toItem: (row: Row) => T): Page<T> {
  const hasMore = rows.length > limit
  const shown = hasMore ? rows.slice(0, limit) : rows
  const last = shown[shown.length - 1]
  return {
    success: true,
    data: shown.map(toItem),
    pagination: { limit, nextCursor: hasMore && last !== undefined ? encodeCursor({ micros: last.position, id: last.id }) : null, hasMore },
  }
}

export interface TenantListOptions<Row, Item> {
  /** The table, e.g. `agents`: a plain identifier from code, never from a request. */
  table: string
  /** The column that binds every row to its tenant, e.g. `sub_account_id`. */
  tenantColumn: string
  /** The caller's tenant: only its rows are listed. */
  tenantId: string
  query: ListQuery
  toItem: (row: Row) => Item
}

/**
 * One page of a tenant's rows of a table, in list order ((created_at, id)
 * ascending), after the query's cursor if it has one: the one keyset list
 * that every list of the API is.
 */
export async function listTenantPage<Row extends { id: string }, Item>(pool: Pool, options: TenantListOptions<Row, Item>): Promise<Page<Item>> {
  return listPage(pool, {
    table: options.table,
    where: [`${sqlIdentifier(options.tenantColumn)} = $1`],
    values: [options.tenantId],
    query: options.query,
    toItem: options.toItem,
  })
}

export interface ListOptions<Row, Item> {
  /** The table, e.g. `audit_events`: a plain identifier from code, never from a request. */
  table: string
  /** What is selected of each row (SQL from code); `*` by default. */
  columns?: string
  /** Conditions that are all true of the listed rows (SQL from code, parameters from $1), and their values. */
  where: readonly string[]
  values: readonly unknown[]
  /** The time column of the keyset; `created_at` by default. The id column is `id`, a UUID. */
  timeColumn?: string
  /** Oldest first (`asc`, the default) or newest first (`desc`). */
  order?: 'asc' | 'desc'
  query: ListQuery
  toItem: (row: Row) => Item
}

/**
 * One page of the rows of a table that meet `where`, in keyset order by
 * (time, id), after the query's cursor if it has one. listTenantPage is the
 * common case; lists with filters, or newest first, say so here.
 */
export async function listPage<Row extends { id: string }, Item>(pool: Pool, options: ListOptions<Row, Item>): Promise<Page<Item>> {
  const { query } = options
  const timeColumn = options.timeColumn ?? 'created_at'
  const order = options.order ?? 'asc'
  const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor)
  const values: unknown[] = [...options.values]
  const conditions = [...options.where]
  if (after !== undefined) {
    values.push(after.micros, after.id)
    conditions.push(afterPositionSql(timeColumn, order, values.length - 1, values.length))
  }
  values.push(query.limit + 1)
  const direction = order === 'asc' ? '' : ' DESC'
  const { rows } = await pool.query<Row & { position: string }>(
    `SELECT ${options.columns ?? '*'}, ${positionSql(timeColumn)} AS position FROM ${sqlIdentifier(options.table)}
      WHERE ${conditions.length === 0 ? 'true' : conditions.join(' AND ')}
      ORDER BY ${sqlIdentifier(timeColumn)}${direction}, id${direction} LIMIT $${values.length}`,
    values,
  )
  return toPage(rows, query.limit, options.toItem)
}
