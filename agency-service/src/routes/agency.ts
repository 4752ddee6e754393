/** GET /v1/agency: the caller's own agency. */
import type { FastifyInstance } from 'fastify'
import { idSchema, itemResponse, timestampSchema } from '@scoped/shared/api-document'
import { NO_QUERY_SCHEMA } from '@scoped/shared/backend-server'
import type { Pool } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { TenantStore } from '../tenants.js'

/** The item's schema: the answer is serialized with it. */
const agencySchema = {
  type: 'object',
  properties: { id: idSchema, name: { type: 'string' }, createdAt: timestampSchema },
  required: ['id', 'name', 'createdAt'],
  additionalProperties: false,
}

export async function agencyRoutes(app: FastifyInstance, options: { pool: Pool }): Promise<void> {
  const tenants = new TenantStore(options.pool)
  app.get('/agency', { schema: { querystring: NO_QUERY_SCHEMA, response: { 200: itemResponse(agencySchema, "The key's agency") } } }, async (request) => {
    const agency = await tenants.findAgency(request.tenant.agencyId)
    if (agency === undefined) throw new ApiError('agencyNotFound')
    return { success: true, data: agency }
  })
}
