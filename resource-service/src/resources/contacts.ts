/** Contacts: a name and, optionally, an email address and an E.164 phone number. */
import type { Columns, ResourceDefinition, ResourceRow } from './resource-store.js'
import { cleanName, iso, nameSchema } from './fields.js'

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
  },
  columns: (body) => {
    const columns: Columns = {}
    if (body['name'] !== undefined) columns['name'] = cleanName(body['name'], 'body.name')
    if (body['email'] !== undefined) columns['email'] = body['email']
    if (body['phone'] !== undefined) columns['phone'] = body['phone']
    return columns
  },
  toItem: (row) => ({
    id: row.id,
    name: row.name,
    email: row.email,
    phone: row.phone,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  }),
  inUseMessage: 'Contact has calls; delete them first',
}
