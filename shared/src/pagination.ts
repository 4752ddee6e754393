/**
 * Keyset (cursor) pagination, the same for every list of the API.
 *
 * Lists are ordered by (created_at, id) ascending, and a cursor is the
 * position of the last row of a page: rows inserted while a client walks a
 * list land after the rows that existed already, so a walk never loses or
 * repeats one. The position keeps created_at to the microsecond (a
 * JavaScript Date would cut it to the millisecond and skip or repeat rows);
 * the cursor is opaque to clients: base64url of `<microseconds>.<id>`.
 */
import type { FastifyRequest } from 'fastify'
import { ApiError } from './errors.js'
import { isUuid } from './db.js'

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

/** SQL for a row's position; select it as `position` alongside the row. */
export const POSITION_SQL = `(extract(epoch FROM created_at) * 1000000)::bigint::text`

/**
 * SQL condition for "after the cursor", with the microseconds and the id as
 * parameters $m and $i; the row comparison is served by an index on
 * (tenant, created_at, id).
 */
export function afterPositionSql(microsParameter: number, idParameter: number): string {
  return `(created_at, id) > (timestamptz 'epoch' + $${microsParameter}::bigint * interval '1 microsecond', $${idParameter}::uuid)`
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
export function toPage<Row extends { id: string; position: string }, T>(rows: readonly Row[], limit: number, toItem: (row: Row) => T): Page<T> {
  const hasMore = rows.length > limit
  const shown = hasMore ? rows.slice(0, limit) : rows
  const last = shown[shown.length - 1]
  return {
    success: true,
    data: shown.map(toItem),
    pagination: { limit, nextCursor: hasMore && last !== undefined ? encodeCursor({ micros: last.position, id: last.id }) : null, hasMore },
  }
}
