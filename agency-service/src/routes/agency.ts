/** GET /v1/agency: the caller's own agency. */
import type { FastifyInstance } from 'fastify'
import { NO_QUERY_SCHEMA } from '@scoped/shared/backend-server'
import type { Pool } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'

export interface Agency {
  id: string
  name: string
  createdAt: string
}

export async function agencyRoutes(app: FastifyInstance, options: { pool: Pool }): Promise<void> {
  app.get('/agency', { schema: { querystring: NO_QUERY_SCHEMA } }, async (request) => {
    const { rows } = await options.pool.query<{ id: string; name: string; created_at: Date }>(`SELECT id, name, created_at FROM agencies WHERE id = $1`, [
      request.tenant.agencyId,
    ])
    const row = rows[0]
    if (row === undefined) throw new ApiError('agencyNotFound')
    const agency: Agency = { id: row.id, name: row.name, createdAt: row.created_at.toISOString() }
    return { success: true, data: agency }
  })
}
