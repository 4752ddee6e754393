/**
 * GET /v1/agency/audit-events: the caller's agency's audit trail (its own
 * key events, its sub-accounts' key and sub-account events, and its console
 * users' events: created, disabled, password changed, signed in, sign-in
 * refused, membership removed), newest first, as a list like every other (`?limit=`, `?cursor=`), filtered by
 * `?type=`, `?keyId=`, `?subAccountId=`, `?since=` (inclusive) and `?until=`
 * (exclusive). Items: `{id, type, at, actor: {kind, id}, keyId, subAccountId, clientAddress}`,
 * the contract's fields and no more: the user a user event is about (and
 * their role) is shown in the console's trail, not here.
 */
import type { FastifyInstance } from 'fastify'
import { idSchema, pageResponse, timestampSchema } from '@scoped/shared/api-document'
import type { Pool } from '@scoped/shared/db'
import { invalidField } from '@scoped/shared/errors'
import { DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT, readLimitAsNumber } from '@scoped/shared/pagination'
import { requireIsoTime, requireUuid } from '@scoped/shared/validation'
import type { AuditEventType, AuditFilters } from '../audit/audit-log.js'
import { AuditLog, auditEventTypes, toAuditEvent } from '../audit/audit-log.js'

interface AuditQuery {
  limit: number
  cursor?: string
  type?: AuditEventType
  keyId?: string
  subAccountId?: string
  since?: string
  until?: string
}

const querySchema = {
  type: 'object',
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: MAX_PAGE_LIMIT, default: DEFAULT_PAGE_LIMIT },
    cursor: { type: 'string', minLength: 1, maxLength: 200 },
    type: { type: 'string', enum: auditEventTypes },
    keyId: { type: 'string', maxLength: 64 },
    subAccountId: { type: 'string', maxLength: 64 },
    since: { type: 'string', maxLength: 64 },
    until: { type: 'string', maxLength: 64 },
  },
  additionalProperties: false,
} as const

/** An audit event (AuditEvent): answers are serialized with it. */
const itemSchema = {
  type: 'object',
  properties: {
    id: idSchema,
    type: { type: 'string', enum: auditEventTypes },
    at: timestampSchema,
    actor: {
      type: 'object',
      properties: {
        kind: { type: 'string', enum: ['user', 'cli', 'key', 'unattributed'] },
        id: {
          type: 'string',
          description:
            'The user id (kind `user`), `ctl:<CTL_ACTOR>` (kind `cli`, self-declared), the API key id (kind `key`), or the database login of a change nobody named (kind `unattributed`).',
        },
      },
      required: ['kind', 'id'],
      additionalProperties: false,
    },
    keyId: { ...idSchema, type: ['string', 'null'] },
    subAccountId: { ...idSchema, type: ['string', 'null'] },
    clientAddress: { type: ['string', 'null'], description: 'The client address the gateway derived; null for ctl.' },
  },
  required: ['id', 'type', 'at', 'actor', 'keyId', 'subAccountId', 'clientAddress'],
  additionalProperties: false,
}

export async function auditEventRoutes(app: FastifyInstance, options: { pool: Pool }): Promise<void> {
  const auditLog = new AuditLog(options.pool)
  app.get<{ Querystring: AuditQuery }>(
    '/agency/audit-events',
    {
      schema: { querystring: querySchema, response: { 200: pageResponse(itemSchema, 'A page of audit events, newest first') } },
      preValidation: readLimitAsNumber,
    },
    async (request) => {
      const { query } = request
      const filters: AuditFilters = {}
      if (query.type !== undefined) filters.type = query.type
      if (query.keyId !== undefined) filters.keyId = requireUuid(query.keyId, 'querystring.keyId')
      if (query.subAccountId !== undefined) filters.subAccountId = requireUuid(query.subAccountId, 'querystring.subAccountId')
      if (query.since !== undefined) filters.since = requireIsoTime(query.since, 'querystring.since')
      if (query.until !== undefined) filters.until = requireIsoTime(query.until, 'querystring.until')
      if (filters.since !== undefined && filters.until !== undefined && filters.since >= filters.until) {
        throw invalidField('querystring.since', 'must be before querystring.until')
      }
      const page = await auditLog.list({ agencyId: request.tenant.agencyId }, filters, {
        limit: query.limit,
        ...(query.cursor === undefined ? {} : { cursor: query.cursor }),
      })
      return { ...page, data: page.data.map(toAuditEvent) }
    },
  )
}
