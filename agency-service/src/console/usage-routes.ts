/**
 * Agency settings → Usage (the agency's own keys and every sub-account's, for
 * its owners and admins) and sub-account settings → Usage (for whoever sees
 * its keys): GET only, read through the same functions as GET /v1/agency/usage,
 * /v1/usage and the request-log routes, so the page and the API agree. A key
 * of another tenant answers 404, as those routes do.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Pool } from '@scoped/shared/db'
import { invalidField } from '@scoped/shared/errors'
import type { UsageOutcome } from '@scoped/shared/usage'
import { isUsageOutcome } from '@scoped/shared/usage'
import { requireUuid } from '@scoped/shared/validation'
import { requestLogPage } from '../routes/request-log.js'
import type { UsageOwner } from '../usage/usage-report.js'
import { usageReport, usageTotals } from '../usage/usage-report.js'
import type { KeyArea } from './access.js'
import { agencyKeyArea, requireAuditReader, subAccountKeyArea } from './access.js'
import { sessionOf } from './authenticate.js'
import { sendPage } from './error-page.js'
import type { ConsolePaths } from './paths.js'
import { consoleRoutes } from './paths.js'
import type { UsageRange, UsageRow } from './usage-views.js'
import { usagePage, usageRanges } from './usage-views.js'

const LOG_PAGE_SIZE = 50
const BUSIEST = 10

type TenantParams = { tenantId: string }

function queryValue(query: unknown, name: string): string | undefined {
  const value = typeof query === 'object' && query !== null ? (query as Record<string, unknown>)[name] : undefined
  return typeof value === 'string' && value !== '' ? value : undefined
}

/** The groups with requests, busiest first, named (a group no longer in `names` was deleted). */
function ranked(totals: ReadonlyMap<string, number>, names: ReadonlyMap<string, string>, href?: (id: string) => string): UsageRow[] {
  return [...totals]
    .filter(([, requests]) => requests > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([id, requests]) => ({ id, name: names.get(id) ?? '(deleted)', requests, ...(href ? { href: href(id) } : {}) }))
}

async function names(pool: Pool, table: 'api_keys' | 'sub_accounts', agencyId: string, ids: readonly string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map()
  const { rows } = await pool.query<{ id: string; name: string }>(`SELECT id, name FROM ${table} WHERE agency_id = $1 AND id = ANY($2::uuid[])`, [
    agencyId,
    ids,
  ])
  return new Map(rows.map((row) => [row.id, row.name]))
}

interface Filters {
  range: UsageRange
  keyId: string | undefined
  outcome: UsageOutcome | undefined
  cursor: string | undefined
}

function readFilters(query: unknown): Filters {
  const rangeText = queryValue(query, 'range') ?? '24h'
  if (!Object.hasOwn(usageRanges, rangeText)) throw invalidField('range', `must be one of ${Object.keys(usageRanges).join(', ')}`)
  const keyText = queryValue(query, 'key')
  const outcomeText = queryValue(query, 'outcome')
  if (outcomeText !== undefined && !isUsageOutcome(outcomeText)) throw invalidField('outcome', 'must be one of the usage outcomes')
  return {
    range: rangeText as UsageRange,
    keyId: keyText === undefined ? undefined : requireUuid(keyText, 'key'),
    outcome: outcomeText as UsageOutcome | undefined,
    cursor: queryValue(query, 'cursor'),
  }
}

function usageOwner(area: KeyArea): UsageOwner {
  return area.subAccount === null ? { agencyId: area.agency.id } : { agencyId: area.agency.id, subAccountId: area.subAccount.id }
}

export async function usageConsoleRoutes(app: FastifyInstance, options: { pool: Pool; now: () => Date; paths: ConsolePaths }): Promise<void> {
  const { pool, now, paths } = options
  const kinds = [
    { path: consoleRoutes.agencyUsage, resolve: agencyKeyArea },
    { path: consoleRoutes.subAccountUsage, resolve: subAccountKeyArea },
  ] as const
  for (const kind of kinds) {
    app.get<{ Params: TenantParams }>(kind.path, async (request: FastifyRequest<{ Params: TenantParams }>, reply) => {
      const session = sessionOf(request)
      const area = await kind.resolve(pool, paths, session.userId, request.params.tenantId)
      requireAuditReader(area)
      const filters = readFilters(request.query)
      const owner = usageOwner(area)
      const range = usageRanges[filters.range]
      const to = now()
      const from = new Date(to.getTime() - range.ms)
      const base = { from, to, granularity: range.granularity, ...(filters.keyId === undefined ? {} : { keyId: filters.keyId }) }
      const totals = await usageReport(pool, owner, { ...base, groupBy: null })
      // Rankings need each key's and sub-account's total only: no points, however many keys the agency has.
      const byKey = await usageTotals(pool, owner, { ...base, groupBy: 'key' })
      const bySub = area.subAccount === null ? await usageTotals(pool, owner, { ...base, groupBy: 'sub-account' }) : null
      const log = await requestLogPage(pool, owner, {
        limit: LOG_PAGE_SIZE,
        since: from.toISOString(),
        ...(filters.keyId === undefined ? {} : { keyId: filters.keyId }),
        ...(filters.outcome === undefined ? {} : { outcome: filters.outcome }),
        ...(filters.cursor === undefined ? {} : { cursor: filters.cursor }),
      })
      const busiest = ranked(byKey, new Map()).slice(0, BUSIEST)
      const keyIds = [...new Set([...busiest.map((row) => row.id), ...log.data.map((item) => item.keyId)])]
      const keyNames = await names(pool, 'api_keys', area.agency.id, keyIds)
      const subNames = bySub === null ? new Map<string, string>() : await names(pool, 'sub_accounts', area.agency.id, [...bySub.keys()])
      const filterParams = {
        range: filters.range,
        ...(filters.keyId === undefined ? {} : { key: filters.keyId }),
        ...(filters.outcome === undefined ? {} : { outcome: filters.outcome }),
      }
      const next = log.pagination.nextCursor
      const body = usagePage({
        paths,
        session,
        area,
        range: filters.range,
        keyId: filters.keyId,
        outcome: filters.outcome,
        points: totals.series[0]?.points ?? [],
        busiest: busiest.map((row) => ({ ...row, name: keyNames.get(row.id) ?? '(deleted)' })),
        subAccounts: bySub === null ? null : ranked(bySub, subNames, (id) => paths.subAccountUsage(id)),
        log: log.data,
        keyNames,
        olderHref: next === null ? undefined : `${area.usagePath}?${new URLSearchParams({ ...filterParams, cursor: next }).toString()}`,
      })
      return sendPage(reply, 200, body)
    })
  }
}
