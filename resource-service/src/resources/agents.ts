/** Agents: a name, owned by one sub-account. */
import type { ResourceDefinition, ResourceRow } from './resource-store.js'
import { idSchema, timestampSchema } from '@scoped/shared/api-document'
import { nameSchema, requireName } from '@scoped/shared/validation'

interface AgentRow extends ResourceRow {
  name: string
}

export interface Agent {
  id: string
  name: string
  createdAt: string
  updatedAt: string
}

const properties = { name: nameSchema }

export const agents: ResourceDefinition<AgentRow, Agent> = {
  path: '/agents',
  table: 'agents',
  noun: 'Agent',
  schemas: {
    create: { type: 'object', properties, required: ['name'], additionalProperties: false },
    update: { type: 'object', properties, additionalProperties: false },
    item: {
      type: 'object',
      properties: { id: idSchema, name: { type: 'string' }, createdAt: timestampSchema, updatedAt: timestampSchema },
      required: ['id', 'name', 'createdAt', 'updatedAt'],
      additionalProperties: false,
    },
  },
  columns: (body) => (body['name'] === undefined ? {} : { name: requireName(body['name'], 'body.name') }),
  toItem: (row) => ({ id: row.id, name: row.name, createdAt: row.created_at.toISOString(), updatedAt: row.updated_at.toISOString() }),
  inUseMessage: 'Agent has calls; delete them first',
}
