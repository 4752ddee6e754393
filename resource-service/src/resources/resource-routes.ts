/**
 * The five routes of one resource (list, create, read, update, delete),
 * acting on the caller's sub-account only. An id that is not a UUID, or
 * that belongs to another tenant, is answered like an id that does not exist.
 */
import type { FastifyInstance } from 'fastify'
import { NO_QUERY_SCHEMA } from '@scoped/shared/backend-server'
import type { Pool } from '@scoped/shared/db'
import { isUuid } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import type { ListQuery } from '@scoped/shared/pagination'
import { listQuerySchema, readLimitAsNumber } from '@scoped/shared/pagination'
import { tenantSubAccountId } from '@scoped/shared/tenant-verifier'
import type { ResourceDefinition, ResourceRow } from './resource-store.js'
import { ResourceStore } from './resource-store.js'

interface ById {
  Params: { id: string }
}

export function resourceRoutes<Row extends ResourceRow, Item>(definition: ResourceDefinition<Row, Item>) {
  return async (app: FastifyInstance, options: { pool: Pool }): Promise<void> => {
    const store = new ResourceStore(options.pool, definition)
    const { path } = definition

    const requireId = (id: string): string => {
      if (!isUuid(id)) throw store.notFound()
      return id
    }

    app.get<{ Querystring: ListQuery }>(path, { schema: { querystring: listQuerySchema }, preValidation: readLimitAsNumber }, async (request) =>
      store.list(tenantSubAccountId(request), request.query),
    )

    app.post<{ Body: Record<string, unknown> }>(path, { schema: { querystring: NO_QUERY_SCHEMA, body: definition.schemas.create } }, async (request, reply) => {
      const item = await store.create(tenantSubAccountId(request), definition.columns(request.body))
      return reply.code(201).send({ success: true, data: item })
    })

    app.get<ById>(`${path}/:id`, { schema: { querystring: NO_QUERY_SCHEMA } }, async (request) => {
      const item = await store.find(tenantSubAccountId(request), requireId(request.params.id))
      if (item === undefined) throw store.notFound()
      return { success: true, data: item }
    })

    app.patch<ById & { Body: Record<string, unknown> }>(`${path}/:id`, { schema: { querystring: NO_QUERY_SCHEMA, body: definition.schemas.update } }, async (request) => {
      const subAccountId = tenantSubAccountId(request)
      const id = requireId(request.params.id)
      const columns = definition.columns(request.body)
      if (Object.keys(columns).length === 0) throw new ApiError('badRequest', 'body must contain at least one field to change')
      const item = await store.update(subAccountId, id, columns)
      if (item === undefined) throw store.notFound()
      return { success: true, data: item }
    })

    app.delete<ById>(`${path}/:id`, { schema: { querystring: NO_QUERY_SCHEMA } }, async (request, reply) => {
      const deleted = await store.delete(tenantSubAccountId(request), requireId(request.params.id))
      if (!deleted) throw store.notFound()
      return reply.code(204).send()
    })
  }
}
