/**
 * Calls: between an agent and a contact of the same sub-account, with a
 * status. A reference to an agent or contact the sub-account does not have
 * (absent, or another tenant's) is a 400 naming the field, the same in both cases.
 */
import { idSchema, timestampSchema } from '@scoped/shared/api-document'
import { requireUuid } from '@scoped/shared/validation'
import type { Columns, ResourceDefinition, ResourceRow } from './resource-store.js'

export const callStatuses = ['queued', 'in-progress', 'completed', 'failed'] as const
export type CallStatus = (typeof callStatuses)[number]

interface CallRow extends ResourceRow {
  agent_id: string
  contact_id: string
  status: CallStatus
}

export interface Call {
  id: string
  agentId: string
  contactId: string
  status: CallStatus
  createdAt: string
  updatedAt: string
}

// Ids are checked in `columns` (the schema's uuid format also takes `urn:uuid:…`, which Postgres does not).
const properties = {
  agentId: { type: 'string', maxLength: 36 },
  contactId: { type: 'string', maxLength: 36 },
  status: { type: 'string', enum: callStatuses },
}

export const calls: ResourceDefinition<CallRow, Call> = {
  path: '/calls',
  table: 'calls',
  noun: 'Call',
  schemas: {
    create: { type: 'object', properties, required: ['agentId', 'contactId'], additionalProperties: false },
    update: { type: 'object', properties, additionalProperties: false },
    item: {
      type: 'object',
      properties: { id: idSchema, agentId: idSchema, contactId: idSchema, status: properties.status, createdAt: timestampSchema, updatedAt: timestampSchema },
      required: ['id', 'agentId', 'contactId', 'status', 'createdAt', 'updatedAt'],
      additionalProperties: false,
    },
  },
  columns: (body) => {
    const columns: Columns = {}
    if (body['agentId'] !== undefined) columns['agent_id'] = requireUuid(body['agentId'], 'body.agentId')
    if (body['contactId'] !== undefined) columns['contact_id'] = requireUuid(body['contactId'], 'body.contactId')
    if (body['status'] !== undefined) columns['status'] = body['status']
    return columns
  },
  toItem: (row) => ({
    id: row.id,
    agentId: row.agent_id,
    contactId: row.contact_id,
    status: row.status,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  }),
  referenceErrors: {
    calls_agent_fk: { field: 'body.agentId', problem: 'does not name an agent of this sub-account' },
    calls_contact_fk: { field: 'body.contactId', problem: 'does not name a contact of this sub-account' },
  },
}
