/** GET /v1/agency: the caller's own agency. */
import type { FastifyInstance } from 'fastify'
import { idSchema, itemResponse, timestampSchema } from '@scoped/shared/api-document'
import { NO_QUERY_SCHEMA } from '@scoped/shared/backend-server'
import type { Pool } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'

export interface Agency {
  id: string
  name: string
  createdAt: string
}

/** The item's schema: the answer is serialized with it. */
const agencySchema = {
  type: 'object',
  properties: { id: idSchema, name: { type: 'string' }, createdAt: timestampSchema },
  required: ['id', 'name', 'createdAt'],
  additionalProperties: false,
}

export async function agencyRoutes(app: FastifyInstance, options: { pool: Pool }): Promise<void> {
  app.get('/agency', { schema: { querystring: NO_QUERY_SCHEMA, response: { 200: itemResponse(agencySchema, "The key's agency") } } }, async (request) => {
    const { rows } = await options.pool.query<{ id: string; name: string; created_at: Date }>(`SELECT id, name, created_at FROM agencies WHERE id = $1`, [
      request.tenant.agencyId,
    ])
    const row = rows[0]
    if (row === undefined) throw new ApiError('agencyNotFound')
    const agency: Agency = { id: row.id, name: row.name, createdAt: row.created_at.toISOString() }
    return { success: true, data: agency }
  })
}
