/**
 * GET /v1/agency/request-log (AGENCY) and GET /v1/request-log (SUB-ACCOUNT):
 * the request log the gateways wrote (migration 018), newest first, paged
 * like every list, filtered by `?keyId=&subAccountId=&outcome=&since=&until=`
 * (subAccountId for agencies only; since inclusive, until exclusive). Another
 * tenant's key or sub-account lists nothing, as an id that does not exist.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { idSchema, pageResponse, timestampSchema } from '@scoped/shared/api-document'
import type { Pool } from '@scoped/shared/db'
import { invalidField } from '@scoped/shared/errors'
import type { Page } from '@scoped/shared/pagination'
import { DEFAULT_PAGE_LIMIT, listPage, MAX_PAGE_LIMIT, readLimitAsNumber } from '@scoped/shared/pagination'
import { tenantSubAccountId } from '@scoped/shared/tenant-verifier'
import { usageOutcomes } from '@scoped/shared/usage'
import { requireIsoTime, requireUuid } from '@scoped/shared/validation'
import { scoped } from './usage.js'

export interface LogQuery {
  limit: number
  cursor?: string
  keyId?: string
  subAccountId?: string
  outcome?: string
  since?: string
  until?: string
}

function querySchema(agency: boolean): object {
  return {
    type: 'object',
    properties: {
      limit: { type: 'integer', minimum: 1, maximum: MAX_PAGE_LIMIT, default: DEFAULT_PAGE_LIMIT },
      cursor: { type: 'string', minLength: 1, maxLength: 200 },
      keyId: { type: 'string', maxLength: 64 },
      ...(agency ? { subAccountId: { type: 'string', maxLength: 64 } } : {}),
      outcome: { type: 'string', enum: usageOutcomes },
      since: { type: 'string', maxLength: 64 },
      until: { type: 'string', maxLength: 64 },
    },
    additionalProperties: false,
  }
}

const itemSchema = {
  type: 'object',
  properties: {
    id: idSchema,
    at: timestampSchema,
    requestId: { type: 'string' },
    keyId: idSchema,
    subAccountId: { ...idSchema, type: ['string', 'null'] },
    method: { type: 'string' },
    path: { type: 'string', description: 'The normalized path, without its query.' },
    status: { type: 'integer' },
    outcome: { type: 'string', enum: usageOutcomes },
    durationMs: { type: 'number' },
    clientAddress: { type: ['string', 'null'] },
  },
  required: ['id', 'at', 'requestId', 'keyId', 'subAccountId', 'method', 'path', 'status', 'outcome', 'durationMs', 'clientAddress'],
  additionalProperties: false,
}

interface Row {
  id: string
  at: Date
  request_id: string
  key_id: string
  sub_account_id: string | null
  method: string
  path: string
  status: number
  outcome: string
  duration_ms: number
  client_address: string | null
}

/** One request of the log, as the API and the console's Usage page show it. */
export interface RequestLogItem {
  id: string
  at: string
  requestId: string
  keyId: string
  subAccountId: string | null
  method: string
  path: string
  status: number
  outcome: string
  durationMs: number
  clientAddress: string | null
}

export function toRequestLogItem(row: Row): RequestLogItem {
  return {
    id: row.id,
    at: row.at.toISOString(),
    requestId: row.request_id,
    keyId: row.key_id,
    subAccountId: row.sub_account_id,
    method: row.method,
    path: row.path,
    status: row.status,
    outcome: row.outcome,
    durationMs: row.duration_ms,
    clientAddress: row.client_address,
  }
}

export interface RequestLogOwner {
  agencyId: string
  subAccountId?: string
}

/** One page of a tenant's request log. */
export async function requestLogPage(pool: Pool, owner: RequestLogOwner, query: LogQuery): Promise<Page<RequestLogItem>> {
  const where = ['agency_id = $1']
  const values: unknown[] = [owner.agencyId]
  const add = (sql: (parameter: string) => string, value: unknown): void => {
    values.push(value)
    where.push(sql(`$${values.length}`))
  }
  if (owner.subAccountId !== undefined) add((p) => `sub_account_id = ${p}`, owner.subAccountId)
  if (query.keyId !== undefined) add((p) => `key_id = ${p}`, requireUuid(query.keyId, 'querystring.keyId'))
  if (query.subAccountId !== undefined) add((p) => `sub_account_id = ${p}`, requireUuid(query.subAccountId, 'querystring.subAccountId'))
  if (query.outcome !== undefined) add((p) => `outcome = ${p}`, query.outcome)
  const since = query.since === undefined ? undefined : requireIsoTime(query.since, 'querystring.since')
  const until = query.until === undefined ? undefined : requireIsoTime(query.until, 'querystring.until')
  if (since !== undefined && until !== undefined && since >= until) throw invalidField('querystring.since', 'must be before querystring.until')
  if (since !== undefined) add((p) => `at >= ${p}`, since)
  if (until !== undefined) add((p) => `at < ${p}`, until)
  const page = { limit: query.limit, ...(query.cursor === undefined ? {} : { cursor: query.cursor }) }
  return listPage(pool, { table: 'request_log', where, values, timeColumn: 'at', order: 'desc', query: page, toItem: toRequestLogItem })
}

function route(app: FastifyInstance, url: string, agency: boolean, owner: (request: FastifyRequest) => RequestLogOwner, pool: Pool): void {
  app.get<{ Querystring: LogQuery }>(
    url,
    {
      schema: scoped(agency, { querystring: querySchema(agency), response: { 200: pageResponse(itemSchema, 'A page of the request log, newest first') } }),
      preValidation: readLimitAsNumber,
    },
    async (request) => requestLogPage(pool, owner(request), request.query),
  )
}

export async function agencyRequestLogRoutes(app: FastifyInstance, options: { pool: Pool }): Promise<void> {
  route(app, '/agency/request-log', true, (request) => ({ agencyId: request.tenant.agencyId }), options.pool)
}

export async function subAccountRequestLogRoutes(app: FastifyInstance, options: { pool: Pool }): Promise<void> {
  route(app, '/request-log', false, (request) => ({ agencyId: request.tenant.agencyId, subAccountId: tenantSubAccountId(request) }), options.pool)
}
