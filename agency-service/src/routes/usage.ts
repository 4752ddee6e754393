/**
 * GET /v1/agency/usage (AGENCY: the agency's own keys and all its
 * sub-accounts' keys) and GET /v1/usage (SUB-ACCOUNT: the key's own
 * sub-account): the usage report (usage/usage-report.ts) of the caller's
 * tenant. `?from=&to=&granularity=&groupBy=&keyId=&subAccountId=` (the last
 * for agencies only); another tenant's id answers 404.
 */
import type { FastifyInstance, FastifySchema } from 'fastify'
import { itemResponse, SCOPE_EXTENSION, timestampSchema } from '@scoped/shared/api-document'
import type { Pool } from '@scoped/shared/db'
import { tenantSubAccountId } from '@scoped/shared/tenant-verifier'
import { statusClasses, usageOutcomes } from '@scoped/shared/usage'
import type { UsageOwner, UsageQueryText } from '../usage/usage-report.js'
import { granularities, groupBys, readUsageRequest, usageReport } from '../usage/usage-report.js'

const TEXT = { type: 'string', maxLength: 64 } as const

function querySchema(agency: boolean): object {
  return {
    type: 'object',
    properties: {
      from: { ...TEXT, description: 'ISO time; default: 24 h before `to`.' },
      to: { ...TEXT, description: 'ISO time; default: now.' },
      granularity: { type: 'string', enum: granularities, description: '`minute` up to 24 h, `hour` up to 90 d, `day` up to 400 d; default `hour`.' },
      groupBy: { type: 'string', enum: agency ? groupBys : groupBys.filter((g) => g !== 'sub-account') },
      keyId: TEXT,
      ...(agency ? { subAccountId: TEXT } : {}),
    },
    additionalProperties: false,
  }
}

const count = { type: 'integer', minimum: 0 } as const
const latency = {
  type: ['number', 'null'],
  description: 'Milliseconds: the upper bound of the histogram bucket holding the percentile; null without requests.',
}
const pointSchema = {
  type: 'object',
  properties: {
    at: timestampSchema,
    requests: count,
    outcomes: {
      type: 'object',
      properties: Object.fromEntries(usageOutcomes.map((o) => [o, count])),
      required: [...usageOutcomes],
      additionalProperties: false,
    },
    statusClasses: {
      type: 'object',
      properties: Object.fromEntries(statusClasses.map((c) => [c, count])),
      required: [...statusClasses],
      additionalProperties: false,
    },
    latencyMs: { type: 'object', properties: { p50: latency, p95: latency, p99: latency }, required: ['p50', 'p95', 'p99'], additionalProperties: false },
  },
  required: ['at', 'requests', 'outcomes', 'statusClasses', 'latencyMs'],
  additionalProperties: false,
}
const reportSchema = {
  type: 'object',
  properties: {
    from: timestampSchema,
    to: timestampSchema,
    granularity: { type: 'string', enum: granularities },
    groupBy: { type: ['string', 'null'], enum: [...groupBys, null] },
    series: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          group: { type: ['string', 'null'], description: 'The key or sub-account id, route prefix or outcome of the series; null without groupBy.' },
          points: { type: 'array', items: pointSchema },
        },
        required: ['group', 'points'],
        additionalProperties: false,
      },
    },
  },
  required: ['from', 'to', 'granularity', 'groupBy', 'series'],
  additionalProperties: false,
}

/** A route's schema with the scope it requires (the API description's `x-scope`), which is not always the service's. */
export function scoped(agency: boolean, schema: FastifySchema): FastifySchema {
  return Object.assign({ [SCOPE_EXTENSION]: agency ? 'AGENCY' : 'SUB-ACCOUNT' }, schema)
}

interface Deps {
  pool: Pool
  now: () => Date
}

function route(app: FastifyInstance, url: string, agency: boolean, owner: (request: Parameters<typeof tenantSubAccountId>[0]) => UsageOwner, deps: Deps): void {
  app.get<{ Querystring: UsageQueryText }>(
    url,
    {
      schema: scoped(agency, {
        querystring: querySchema(agency),
        response: { 200: itemResponse(reportSchema, 'Usage per bucket of the range, one series per group') },
      }),
    },
    async (request) => {
      const tenant = owner(request)
      const report = await usageReport(deps.pool, tenant, readUsageRequest(request.query, tenant, deps.now()))
      return { success: true, data: report }
    },
  )
}

/** GET /v1/agency/usage, under the AGENCY routes. */
export async function agencyUsageRoutes(app: FastifyInstance, deps: Deps): Promise<void> {
  route(app, '/agency/usage', true, (request) => ({ agencyId: request.tenant.agencyId }), deps)
}

/** GET /v1/usage, under the SUB-ACCOUNT routes. */
export async function subAccountUsageRoutes(app: FastifyInstance, deps: Deps): Promise<void> {
  route(app, '/usage', false, (request) => ({ agencyId: request.tenant.agencyId, subAccountId: tenantSubAccountId(request) }), deps)
}
