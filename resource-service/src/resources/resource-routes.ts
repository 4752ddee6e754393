/**
 * The five routes of one resource (list, create, read, update, delete),
 * acting on the caller's sub-account only. An id that is not a UUID, or
 * that belongs to another tenant, is answered like an id that does not exist.
 */
import type { FastifyInstance } from 'fastify'
import { errorResponse, itemResponse, noContentResponse, pageResponse } from '@scoped/shared/api-document'
import { NO_QUERY_SCHEMA } from '@scoped/shared/backend-server'
import type { Pool } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import type { ListQuery } from '@scoped/shared/pagination'
import { listQuerySchema, readLimitAsNumber } from '@scoped/shared/pagination'
import { tenantSubAccountId } from '@scoped/shared/tenant-verifier'
import { uuidOrNotFound } from '@scoped/shared/validation'
import type { ResourceDefinition, ResourceRow } from './resource-store.js'
import { ResourceStore } from './resource-store.js'

interface ById {
  Params: { id: string }
}

export function resourceRoutes<Row extends ResourceRow, Item>(definition: ResourceDefinition<Row, Item>) {
  return async (app: FastifyInstance, options: { pool: Pool }): Promise<void> => {
    const store = new ResourceStore(options.pool, definition)
    const { path } = definition
    const { item } = definition.schemas
    const plural = path.slice(1)
    const deleted = {
      204: noContentResponse('Deleted'),
      ...(definition.inUseMessage === undefined ? {} : { 409: errorResponse(`Still in use: "${definition.inUseMessage}"`) }),
    }

    const requireId = (id: string): string => uuidOrNotFound(id, () => store.notFound())

    app.get<{ Querystring: ListQuery }>(
      path,
      { schema: { querystring: listQuerySchema, response: { 200: pageResponse(item, `A page of ${plural}`) } }, preValidation: readLimitAsNumber },
      async (request) => store.list(tenantSubAccountId(request), request.query),
    )

    app.post<{ Body: Record<string, unknown> }>(
      path,
      { schema: { querystring: NO_QUERY_SCHEMA, body: definition.schemas.create, response: { 201: itemResponse(item, 'Created') } } },
      async (request, reply) => {
        const item = await store.create(tenantSubAccountId(request), definition.columns(request.body))
        return reply.code(201).send({ success: true, data: item })
      },
    )

    app.get<ById>(`${path}/:id`, { schema: { querystring: NO_QUERY_SCHEMA, response: { 200: itemResponse(item, 'The item') } } }, async (request) => {
      const item = await store.find(tenantSubAccountId(request), requireId(request.params.id))
      if (item === undefined) throw store.notFound()
      return { success: true, data: item }
    })

    app.patch<ById & { Body: Record<string, unknown> }>(
      `${path}/:id`,
      { schema: { querystring: NO_QUERY_SCHEMA, body: definition.schemas.update, response: { 200: itemResponse(item, 'The updated item') } } },
      async (request) => {
        const subAccountId = tenantSubAccountId(request)
        const id = requireId(request.params.id)
        const columns = definition.columns(request.body)
        if (Object.keys(columns).length === 0) throw new ApiError('badRequest', 'body must contain at least one field to change')
        const item = await store.update(subAccountId, id, columns)
        if (item === undefined) throw store.notFound()
        return { success: true, data: item }
      },
    )

    app.delete<ById>(`${path}/:id`, { schema: { querystring: NO_QUERY_SCHEMA, response: deleted } }, async (request, reply) => {
      const deleted = await store.delete(tenantSubAccountId(request), requireId(request.params.id))
      if (!deleted) throw store.notFound()
      return reply.code(204).send()
    })
  }
}
