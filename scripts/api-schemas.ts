/**
 * Named schemas for the API description: the items a client names in its own
 * code (Agent, KeyItem, AuditEvent, …), their lists' pages and the request
 * bodies are moved from the operations into `components.schemas` and
 * referenced from there, so a generated client has a type for each. Names
 * come from the path (`/v1/agents/{id}`: Agent; `…/keys/{keyId}/roll`: the
 * body KeyRoll); a name given to two different schemas is a problem the merge
 * reports.
 *
 * Also the truth about tenant fields: the gateway removes `agency_id` and
 * `sub_account_id` from a JSON body's top level before forwarding it, so a
 * body that carries them is accepted (and they are ignored), while any other
 * unknown field is still refused with 400 by the service.
 */
type Json = Record<string, unknown>

/** Where an entity's name is not the singular of its path segment. */
const ENTITY_NAMES: Record<string, string> = { keys: 'KeyItem', 'audit-events': 'AuditEvent', webhooks: 'WebhookEndpoint', deliveries: 'WebhookDelivery' }

/** The top-level body fields the gateway strips (gateway/src/tenant-stripping.ts), as the document describes them. */
export const TENANT_BODY_FIELDS = ['agency_id', 'sub_account_id'] as const

function isParameter(segment: string): boolean {
  return segment.startsWith('{') && segment.endsWith('}')
}

/** `sub-accounts` → `SubAccounts`: a path segment as a type's name. */
export function pascal(segment: string): string {
  return segment
    .split(/[-_]/)
    .filter((word) => word !== '')
    .map((word) => word[0]!.toUpperCase() + word.slice(1))
    .join('')
}

/** `agencies` → `agency`, `calls` → `call`. */
export function singular(segment: string): string {
  if (segment.endsWith('ies')) return `${segment.slice(0, -3)}y`
  if (segment.endsWith('s') && !segment.endsWith('ss')) return segment.slice(0, -1)
  return segment
}

/** The path's static segments after /v1, and the action (`roll`, `revoke`) when the path ends with one after an id. */
function pathParts(path: string): { statics: string[]; action: string | undefined } {
  const segments = path.split('/').filter((segment) => segment !== '' && segment !== 'v1')
  const last = segments.at(-1) ?? ''
  // A static singular segment after an id is an action on that item (…/{keyId}/roll); a plural one is a collection (…/{id}/keys).
  const action = segments.length >= 2 && !isParameter(last) && isParameter(segments.at(-2)!) && !last.endsWith('s') ? last : undefined
  const statics = segments.filter((segment) => !isParameter(segment))
  if (action !== undefined) statics.pop()
  return { statics, action }
}

/** The name of the item a path is about: `/v1/agents/{id}` Agent, `/v1/agency/sub-accounts/{id}/keys` KeyItem. */
export function entityName(path: string): string {
  const segment = pathParts(path).statics.at(-1) ?? 'resource'
  return ENTITY_NAMES[segment] ?? pascal(singular(segment))
}

/** The name of an operation's request body: AgentCreate, AgentUpdate, KeyRoll, KeyRevoke. */
export function bodyName(method: string, path: string): string {
  const base = entityName(path).replace(/Item$/, '')
  const { action } = pathParts(path)
  if (action !== undefined) return `${base}${pascal(action)}`
  return `${base}${method === 'patch' ? 'Update' : method === 'put' ? 'Replace' : 'Create'}`
}

function jsonSchemaOf(container: Json | undefined): Json | undefined {
  const content = container?.['content'] as Record<string, { schema?: Json }> | undefined
  return content?.['application/json']?.schema
}

function setJsonSchema(container: Json, schema: Json): void {
  const content = container['content'] as Record<string, Json>
  content['application/json'] = { ...content['application/json'], schema }
}

/** A body schema that says what the gateway does with tenant fields (see the comment at the top). */
export function withTenantFields(schema: Json): Json {
  if (schema['type'] !== 'object') return schema
  const properties = { ...((schema['properties'] as Json | undefined) ?? {}) }
  for (const field of TENANT_BODY_FIELDS) {
    properties[field] = {
      description: `Ignored: the gateway removes \`${field}\` (in any letter case) from the body before the service reads it; the tenant comes from the key alone.`,
      deprecated: true,
    }
  }
  return { ...schema, properties }
}

/** The component schemas, filled as operations are named; a name given to two different schemas is a problem. */
export class SchemaNames {
  readonly problems: string[] = []

  constructor(private readonly schemas: Json) {}

  /** Registers `schema` as `name` (once) and answers the reference to it. */
  name(name: string, schema: Json): Json {
    const existing = this.schemas[name]
    if (existing === undefined) this.schemas[name] = schema
    else if (JSON.stringify(existing) !== JSON.stringify(schema)) this.problems.push(`component schema ${name} is given to two different schemas`)
    return { $ref: `#/components/schemas/${name}` }
  }

  /**
   * The item (Agent), or the item with more fields (CreatedKeyItem: the key item plus its plaintext, on a create or roll;
   * WebhookEndpointWithSecret: an endpoint with its signing secret, on a registration or a roll of the secret).
   */
  private item(entity: string, schema: Json, created: boolean): Json {
    const properties = schema['properties'] as Json | undefined
    if (properties?.['secret'] !== undefined) return this.name(`${entity}WithSecret`, schema)
    return this.name(created && properties?.['key'] !== undefined ? `Created${entity}` : entity, schema)
  }

  /** Names what an operation answers and takes: its success bodies' items and pages, and its request body. */
  nameOperation(method: string, path: string, operation: { responses: Record<string, Json>; requestBody?: Json }): void {
    const entity = entityName(path)
    for (const [status, response] of Object.entries(operation.responses)) {
      const schema = /^2/.test(status) ? jsonSchemaOf(response) : undefined
      const properties = schema?.['properties'] as Json | undefined
      if (schema === undefined || properties === undefined) continue
      const data = properties['data'] as Json | undefined
      if (properties['pagination'] !== undefined && data !== undefined) {
        const page = {
          ...schema,
          properties: {
            ...properties,
            data: { ...data, items: this.item(entity, data['items'] as Json, false) },
            pagination: this.name('Pagination', properties['pagination'] as Json),
          },
        }
        setJsonSchema(response, this.name(`${entity}Page`, page))
      } else if (data !== undefined) {
        setJsonSchema(response, { ...schema, properties: { ...properties, data: this.item(entity, data, status === '201') } })
      }
    }
    const body = jsonSchemaOf(operation.requestBody)
    if (body !== undefined && operation.requestBody !== undefined)
      setJsonSchema(operation.requestBody, this.name(bodyName(method, path), withTenantFields(body)))
  }
}
