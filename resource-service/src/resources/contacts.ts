/** Contacts: a name and, optionally, an email address and an E.164 phone number. */
import type { Columns, ResourceDefinition, ResourceRow } from './resource-store.js'
import { idSchema, timestampSchema } from '@scoped/shared/api-document'
import { nameSchema, requireName } from '@scoped/shared/validation'

interface ContactRow extends ResourceRow {
  name: string
  email: string | null
  phone: string | null
}

export interface Contact {
  id: string
  name: string
  email: string | null
  phone: string | null
  createdAt: string
  updatedAt: string
}

// null clears an optional field.
const properties = {
  name: nameSchema,
  email: { type: ['string', 'null'], format: 'email', maxLength: 254 },
  phone: { type: ['string', 'null'], pattern: '^\\+[1-9][0-9]{1,14}$' },
}

export const contacts: ResourceDefinition<ContactRow, Contact> = {
  path: '/contacts',
  table: 'contacts',
  noun: 'Contact',
  schemas: {
    create: { type: 'object', properties, required: ['name'], additionalProperties: false },
    update: { type: 'object', properties, additionalProperties: false },
    item: {
      type: 'object',
      properties: {
        id: idSchema,
        name: { type: 'string' },
        email: { type: ['string', 'null'], format: 'email' },
        phone: { type: ['string', 'null'], pattern: properties.phone.pattern },
        createdAt: timestampSchema,
        updatedAt: timestampSchema,
      },
      required: ['id', 'name', 'email', 'phone', 'createdAt', 'updatedAt'],
      additionalProperties: false,
    },
  },
  columns: (body) => {
    const columns: Columns = {}
    if (body['name'] !== undefined) columns['name'] = requireName(body['name'], 'body.name')
    if (body['email'] !== undefined) columns['email'] = body['email']
    if (body['phone'] !== undefined) columns['phone'] = body['phone']
    return columns
  },
  toItem: (row) => ({
    id: row.id,
    name: row.name,
    email: row.email,
    phone: row.phone,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  }),
  inUseMessage: 'Contact has calls; delete them first',
}
