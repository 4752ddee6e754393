/**
 * /v1/agency/sub-accounts: list, create, read, rename and delete the
 * caller's agency's sub-accounts. Another agency's sub-account, or an id
 * that is not a UUID, is answered like one that does not exist.
 *
 * Deleting a sub-account deletes its keys with the same immediate effect as
 * deleting a key: after the transaction has committed, every gateway
 * replica drops them before the DELETE answers.
 */
import type { FastifyInstance } from 'fastify'
import { NO_QUERY_SCHEMA } from '@scoped/shared/backend-server'
import type { Pool } from '@scoped/shared/db'
import { isUuid } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { InvalidationError } from '@scoped/shared/key-invalidation'
import type { ListQuery } from '@scoped/shared/pagination'
import { listQuerySchema, readLimitAsNumber } from '@scoped/shared/pagination'
import type { KeyService } from '../keys/key-service.js'
import { TENANT_NAME_MAX_LENGTH } from '../tenants.js'
import { requireName } from '../validation.js'
import { SubAccountStore } from './sub-account-store.js'

interface ById {
  Params: { id: string }
}

interface NameBody {
  Body: { name?: string }
}

const nameSchema = { type: 'string', minLength: 1, maxLength: TENANT_NAME_MAX_LENGTH }
const createSchema = { type: 'object', properties: { name: nameSchema }, required: ['name'], additionalProperties: false }
const updateSchema = { type: 'object', properties: { name: nameSchema }, additionalProperties: false }

export const INVALIDATION_FAILED_MESSAGE =
  'The sub-account was deleted, but the gateways could not all be told about its keys, so they may still be accepted for a while'

function notFound(): ApiError {
  return new ApiError('subAccountNotFound')
}

function requireId(id: string): string {
  if (!isUuid(id)) throw notFound()
  return id
}

export async function subAccountRoutes(app: FastifyInstance, options: { pool: Pool; keys: KeyService }): Promise<void> {
  const store = new SubAccountStore(options.pool, options.keys)
  const path = '/agency/sub-accounts'

  app.get<{ Querystring: ListQuery }>(path, { schema: { querystring: listQuerySchema }, preValidation: readLimitAsNumber }, async (request) =>
    store.list(request.tenant.agencyId, request.query),
  )

  app.post<NameBody>(path, { schema: { querystring: NO_QUERY_SCHEMA, body: createSchema } }, async (request, reply) => {
    const item = await store.create(request.tenant.agencyId, requireName(request.body.name, 'body.name', TENANT_NAME_MAX_LENGTH))
    return reply.code(201).send({ success: true, data: item })
  })

  app.get<ById>(`${path}/:id`, { schema: { querystring: NO_QUERY_SCHEMA } }, async (request) => {
    const item = await store.find(request.tenant.agencyId, requireId(request.params.id))
    if (item === undefined) throw notFound()
    return { success: true, data: item }
  })

  app.patch<ById & NameBody>(`${path}/:id`, { schema: { querystring: NO_QUERY_SCHEMA, body: updateSchema } }, async (request) => {
    const id = requireId(request.params.id)
    if (request.body.name === undefined) throw new ApiError('badRequest', 'body must contain at least one field to change')
    const item = await store.rename(request.tenant.agencyId, id, requireName(request.body.name, 'body.name', TENANT_NAME_MAX_LENGTH))
    if (item === undefined) throw notFound()
    return { success: true, data: item }
  })

  app.delete<ById>(`${path}/:id`, { schema: { querystring: NO_QUERY_SCHEMA } }, async (request, reply) => {
    const actor = `api-key:${request.tenant.keyId}`
    const invalidations = await store.delete(request.tenant.agencyId, requireId(request.params.id), actor)
    if (invalidations === undefined) throw notFound()
    try {
      const report = await options.keys.invalidate(invalidations)
      if (report.acknowledged < report.subscribers) {
        request.log.warn({ ...report, keys: invalidations.length }, 'sub-account deleted; not every gateway replica acknowledged in time')
      }
    } catch (error) {
      if (!(error instanceof InvalidationError)) throw error
      request.log.error({ err: error }, 'sub-account deleted; gateway caches not invalidated')
      throw new ApiError('serviceUnavailable', INVALIDATION_FAILED_MESSAGE)
    }
    return reply.code(204).send()
  })
}
