/**
 * Agency settings → audit trail (the agency's events and its sub-accounts',
 * for its owners and admins) and sub-account settings → audit trail (its own,
 * for whoever sees its keys): GET only, newest first, 50 events a page,
 * filtered by event type.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Pool } from '@scoped/shared/db'
import type { AuditEventType, AuditOwner } from '../audit/audit-log.js'
import { AuditLog, auditEventTypes } from '../audit/audit-log.js'
import type { KeyArea } from './access.js'
import { agencyKeyArea, requireAuditReader, subAccountKeyArea } from './access.js'
import { auditKeyFacts } from './audit-keys.js'
import { auditPage } from './audit-views.js'
import { sessionOf } from './authenticate.js'
import { sendPage } from './error-page.js'
import type { ConsolePaths } from './paths.js'
import { consoleRoutes } from './paths.js'

const PAGE_SIZE = 50

type TenantParams = { tenantId: string }

function queryValue(query: unknown, name: string): string | undefined {
  const value = typeof query === 'object' && query !== null ? (query as Record<string, unknown>)[name] : undefined
  return typeof value === 'string' && value !== '' ? value : undefined
}

export async function auditRoutes(app: FastifyInstance, options: { pool: Pool; paths: ConsolePaths; now: () => Date }): Promise<void> {
  const { pool, paths } = options
  const auditLog = new AuditLog(pool)
  const kinds: ReadonlyArray<{ path: string; resolve: typeof agencyKeyArea; owner: (area: KeyArea) => AuditOwner }> = [
    { path: consoleRoutes.agencyAudit, resolve: agencyKeyArea, owner: (area) => ({ agencyId: area.agency.id }) },
    { path: consoleRoutes.subAccountAudit, resolve: subAccountKeyArea, owner: (area) => ({ subAccountId: area.subAccount!.id }) },
  ]
  for (const kind of kinds) {
    app.get<{ Params: TenantParams }>(kind.path, async (request: FastifyRequest<{ Params: TenantParams }>, reply) => {
      const session = sessionOf(request)
      const area = await kind.resolve(pool, paths, session.userId, request.params.tenantId)
      requireAuditReader(area)
      const typeText = queryValue(request.query, 'type')
      const type = auditEventTypes.find((known) => known === typeText) as AuditEventType | undefined
      const cursor = queryValue(request.query, 'cursor')
      const page = await auditLog.list(kind.owner(area), type === undefined ? {} : { type }, {
        limit: PAGE_SIZE,
        ...(cursor === undefined ? {} : { cursor }),
      })
      const olderHref =
        page.pagination.nextCursor === null
          ? undefined
          : `${area.auditPath}?${new URLSearchParams({ ...(type === undefined ? {} : { type }), cursor: page.pagination.nextCursor }).toString()}`
      const names = await auditLog.names(page.data, area.agency.id)
      const keyFacts = await auditKeyFacts(
        pool,
        page.data.map((event) => event.keyId),
        area.agency.id,
      )
      return sendPage(reply, 200, auditPage({ paths, session, area, events: page.data, names, keyFacts, type, olderHref, now: options.now() }))
    })
  }
}
