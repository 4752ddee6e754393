/** Agents: a name, owned by one sub-account. */
import type { ResourceDefinition, ResourceRow } from './resource-store.js'
import { cleanName, iso, nameSchema } from './fields.js'

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
  },
  columns: (body) => (body['name'] === undefined ? {} : { name: cleanName(body['name'], 'body.name') }),
  toItem: (row) => ({ id: row.id, name: row.name, createdAt: iso(row.created_at), updatedAt: iso(row.updated_at) }),
  inUseMessage: 'Agent has calls; delete them first',
}
