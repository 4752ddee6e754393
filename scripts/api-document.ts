/**
 * The public API description (OpenAPI 3.1), built from the services' own
 * route schemas: both service apps are built in-process (nothing listens,
 * nothing connects), @fastify/swagger (shared/src/api-document.ts) answers
 * each one's operations, and they are merged here with the route map, the
 * way the gateway exposes them:
 *
 *   - an operation is published only when a scoped route of the map reaches
 *     it (longest prefix, and the route's backend is the operation's service);
 *     its `x-scope` is that route's scope, which must be the one the service
 *     itself requires;
 *   - every operation carries the two key schemes (exactly one of them), the
 *     errors the gateway and the service answer, all in the envelope, and
 *     lists carry their pagination;
 *   - nothing a caller without a key should not see: no server addresses, no
 *     internal headers, no console, no health probes.
 *
 * scripts/openapi.ts writes the result to deploy/openapi.json; the gateway
 * serves that file (gateway/src/documents.ts). A test regenerates it and fails
 * when the file is stale.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { buildAgencyApp } from '@scoped/agency-service/app'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { buildResourceApp } from '@scoped/resource-service/app'
import { OPTIONAL_BODY_EXTENSION, PERMISSION_EXTENSION, SCOPE_EXTENSION } from '@scoped/shared/api-document'
import { createPool } from '@scoped/shared/db'
import { errorCatalog } from '@scoped/shared/errors'
import { isReadMethod } from '@scoped/shared/permissions'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { createLogger } from '@scoped/shared/logger'
import { DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT } from '@scoped/shared/pagination'
import { AGENCY_SERVICE_AUDIENCE, RESOURCE_SERVICE_AUDIENCE } from '@scoped/shared/tenant-signature'
import type { ReportRoute, RouteMap, ScopedRoute } from '@scoped/gateway/route-map'
import { matchRoute, parseRouteMap } from '@scoped/gateway/route-map'
import { projectRoot } from '../test/helpers/processes.js'
import { pascal, SchemaNames, singular } from './api-schemas.js'

export const openApiFile = join(projectRoot, 'deploy', 'openapi.json')
export const defaultRoutesFile = join(projectRoot, 'deploy', 'routes.yaml')

type Json = Record<string, unknown>

export interface OpenApiDocument extends Json {
  openapi: string
  info: Json
  paths: Record<string, Record<string, Operation>>
  components: Json
}

export interface Operation extends Json {
  operationId: string
  summary: string
  tags: string[]
  /** The key scope it needs; absent on a leak report, which needs no key. */
  [SCOPE_EXTENSION]?: string
  /** The permission a restricted key needs for it; absent where the route names none. */
  [PERMISSION_EXTENSION]?: string
  /** `[]` on a leak report: no key (the document's default asks for one). */
  security?: Json[]
  responses: Record<string, Json>
  parameters?: Json[]
  requestBody?: Json
}

/** One service's own document, as @fastify/swagger answers it. */
export interface ServiceDocument {
  /** The backend's audience: routes of the map name it (ScopedRoute.audience). */
  audience: string
  document: { paths?: Record<string, Record<string, Json>>; components?: { schemas?: Record<string, unknown> } }
}

const METHODS = ['get', 'put', 'post', 'patch', 'delete', 'options', 'head'] as const

/** Builds both service apps without listening or connecting, and reads their documents. */
export async function serviceDocuments(): Promise<ServiceDocument[]> {
  // A pool that is never used: building the apps queries nothing.
  const pool = createPool('postgresql://openapi@127.0.0.1:1/none', { max: 1, applicationName: 'openapi' })
  const logger = createLogger('openapi', 'silent')
  const signingSecrets = ['the API description is built without serving anything']
  const apps: Array<[string, FastifyInstance]> = [
    [AGENCY_SERVICE_AUDIENCE, await buildAgencyApp({ pool, keys: new KeyService(pool, new KeyRevocationNotifier(pool, null)), logger, signingSecrets })],
    [RESOURCE_SERVICE_AUDIENCE, await buildResourceApp({ pool, logger, signingSecrets })],
  ]
  try {
    const documents: ServiceDocument[] = []
    for (const [audience, app] of apps) {
      await app.ready()
      documents.push({ audience, document: structuredClone(app.swagger()) as ServiceDocument['document'] })
    }
    return documents
  } finally {
    for (const [, app] of apps) await app.close()
    await pool.end()
  }
}

// ---------------------------------------------------------------- names

function isParameter(segment: string): boolean {
  return segment.startsWith('{') && segment.endsWith('}')
}

function article(noun: string): string {
  return /^[aeiou]/i.test(noun) ? `an ${noun}` : `a ${noun}`
}

/**
 * An operation id and summary from the method and path, unless the route's
 * schema gives its own: `GET /v1/agents` listAgents "List agents",
 * `POST /v1/agents` createAgent "Create an agent", `GET /v1/agents/{id}`
 * getAgent "Get an agent", `POST …/keys/{keyId}/roll` rollAgencySubAccountKey.
 */
export function operationNames(method: string, path: string): { operationId: string; summary: string } {
  const segments = path.split('/').filter((segment) => segment !== '' && segment !== 'v1')
  const last = segments.at(-1) ?? ''
  const endsWithParameter = isParameter(last)
  // A static segment followed by a parameter names one item of a collection.
  const named = segments.map((segment, index) => {
    if (isParameter(segment)) return ''
    return index < segments.length - 1 && isParameter(segments[index + 1]!) ? singular(segment) : segment
  })
  const statics = named.filter((segment) => segment !== '')
  const noun = statics.at(-1) ?? 'resource'
  const verb = method.toLowerCase()
  const collection = !endsWithParameter && noun.endsWith('s')
  // POST to a static segment after a parameter that is not a collection is an action on the item: …/{keyId}/roll.
  const action = !endsWithParameter && !collection && segments.length >= 2 && isParameter(segments.at(-2)!) ? noun : undefined
  const subject = action === undefined ? statics : statics.slice(0, -1)
  const thing = subject.at(-1) ?? noun
  let id: string
  let summary: string
  if (action !== undefined) {
    id = `${action}${subject.map(pascal).join('')}`
    summary = `${pascal(action)} ${article(thing)}`
  } else if (verb === 'get' && collection) {
    id = `list${statics.map(pascal).join('')}`
    summary = `List ${noun}`
  } else if (verb === 'post' && collection) {
    const one = singular(noun)
    id = `create${[...statics.slice(0, -1), one].map(pascal).join('')}`
    summary = `Create ${article(one)}`
  } else {
    const verbs: Record<string, [string, string]> = {
      get: ['get', 'Get'],
      patch: ['update', 'Update'],
      put: ['replace', 'Replace'],
      delete: ['delete', 'Delete'],
    }
    const [idVerb, summaryVerb] = verbs[verb] ?? [verb, pascal(verb)]
    id = `${idVerb}${statics.map(pascal).join('')}`
    summary = endsWithParameter || verb !== 'get' ? `${summaryVerb} ${article(thing)}` : `${summaryVerb} the ${thing}`
  }
  return { operationId: id, summary }
}

// ---------------------------------------------------------------- shared parts

const header = (name: string): Json => ({ $ref: `#/components/headers/${name}` })

/** Every response the gateway writes carries its request id. */
const REQUEST_ID = { 'x-request-id': header('X-Request-Id') }
/** On a rate-limited route, every answer after the limits were counted: the limit that applied and what is left of it. */
const RATE_LIMIT = { RateLimit: header('RateLimit'), 'RateLimit-Policy': header('RateLimit-Policy') }
/** Every 429 and every 503 says when to retry. */
const RETRY_AFTER = { 'Retry-After': header('Retry-After') }

/** The response headers the gateway writes, named once (components.headers). */
const HEADERS: Json = {
  'X-Request-Id': {
    description: 'The id of this request, as the gateway logged it: quote it when asking about a request.',
    required: true,
    schema: { type: 'string', minLength: 1 },
  },
  RateLimit: {
    description:
      'On a rate-limited route (draft-ietf-httpapi-ratelimit-headers): the limit that applied to this request and what is left of it, e.g. `"tenant";r=199;t=1`.',
    schema: { type: 'string' },
  },
  'RateLimit-Policy': {
    description: 'On a rate-limited route (draft-ietf-httpapi-ratelimit-headers): the policies that apply, e.g. `"tenant";q=200;w=2`.',
    schema: { type: 'string' },
  },
  'Retry-After': { description: 'Seconds to wait before retrying.', required: true, schema: { type: 'integer', minimum: 0 } },
}

const ERROR_SCHEMA_REF = { $ref: '#/components/schemas/ErrorEnvelope' }

function errorContent(examples: Record<string, { summary: string; message: string }>): Json {
  return {
    'application/json': {
      schema: ERROR_SCHEMA_REF,
      examples: Object.fromEntries(
        Object.entries(examples).map(([name, example]) => [name, { summary: example.summary, value: { success: false, message: example.message } }]),
      ),
    },
  }
}

/** An error answer; its headers are the request id and, once the rate limits were counted, theirs, unless `headers` says otherwise. */
function errorResponse(
  description: string,
  examples: Record<string, { summary: string; message: string }>,
  headers: Json = { ...RATE_LIMIT, ...REQUEST_ID },
): Json {
  return { description, headers, content: errorContent(examples) }
}

/** The errors every operation may answer, by status: what the gateway answers, and what the services do. */
const ERROR_RESPONSES: Record<string, [string, Json]> = {
  '400': [
    'BadRequest',
    errorResponse('The request is invalid: the message names the field or the problem.', {
      validation: { summary: 'A body or query that fails validation', message: 'body.name is required' },
      unknownField: { summary: 'An unknown field (bodies and queries are strict)', message: 'body.nickname is not allowed' },
      invalidJson: { summary: 'A body that is not JSON', message: errorCatalog.invalidJson.message },
      badPath: { summary: 'A path the gateway refuses (.. or // segments, encoded slashes, …)', message: errorCatalog.badPath.message },
      tooDeep: { summary: 'JSON nested deeper than 32 levels', message: errorCatalog.tooDeep.message },
    }),
  ],
  '401': [
    'Unauthorized',
    errorResponse(
      'No valid key: missing, malformed, unknown, sent twice or in both headers (`Invalid or missing API key`), or revoked, deleted or expired (`Invalid or revoked API key`).',
      {
        missing: { summary: 'Key missing, malformed or unknown', message: errorCatalog.missingKey.message },
        revoked: { summary: 'Key revoked, deleted or expired', message: errorCatalog.revokedKey.message },
      },
      { 'WWW-Authenticate': { description: 'Always `Bearer`.', required: true, schema: { type: 'string', const: 'Bearer' } }, ...REQUEST_ID },
    ),
  ],
  '403': [
    'Forbidden',
    errorResponse(
      'The key is valid but may not do this.',
      {
        scope: { summary: 'A key of the other scope', message: errorCatalog.scopeMismatch.message },
        address: { summary: 'A key used from outside its address allowlist', message: 'This API key cannot be used from this address' },
        permission: { summary: 'A restricted key without the permission the operation needs', message: errorCatalog.permissionRefused.message },
      },
      REQUEST_ID,
    ),
  ],
  '404': [
    'NotFound',
    errorResponse("Nothing here for this key: no such path, or an id that does not exist or is another tenant's (answered alike).", {
      path: { summary: 'No such path', message: errorCatalog.notFound.message },
      item: { summary: 'No such item for this key', message: 'Agent not found' },
    }),
  ],
  '409': [
    'Conflict',
    errorResponse('The change conflicts with the current state.', { inUse: { summary: 'Still referenced', message: 'Agent has calls; delete them first' } }),
  ],
  '413': [
    'PayloadTooLarge',
    errorResponse('The body is larger than 1 MiB.', { tooLarge: { summary: 'Body too large', message: errorCatalog.payloadTooLarge.message } }),
  ],
  '429': [
    'TooManyRequests',
    errorResponse(
      'Too many requests: failed authentications from this client address, or a key or tenant over its rate limit. Retry after `Retry-After` seconds.',
      {
        failedAuthentication: { summary: 'Too many failed authentications from this address', message: errorCatalog.tooManyAuthFailures.message },
        rateLimited: { summary: 'A key or tenant over its rate limit', message: errorCatalog.rateLimited.message },
      },
      { ...RETRY_AFTER, ...RATE_LIMIT, ...REQUEST_ID },
    ),
  ],
  '502': [
    'BadGateway',
    errorResponse('The service behind the gateway could not be reached.', {
      down: { summary: 'Service unreachable', message: errorCatalog.badGateway.message },
    }),
  ],
  '503': [
    'ServiceUnavailable',
    errorResponse(
      'Temporarily unavailable: retry shortly (after `Retry-After` seconds when it is given). Never a statement about the key.',
      {
        authentication: { summary: 'Keys cannot be checked right now', message: errorCatalog.authUnavailable.message },
        busy: { summary: 'The service is at capacity, or this tenant has its share of it in use', message: errorCatalog.upstreamBusy.message },
        unavailable: { summary: 'Shutting down or not ready', message: errorCatalog.serviceUnavailable.message },
      },
      { ...RETRY_AFTER, ...RATE_LIMIT, ...REQUEST_ID },
    ),
  ],
  '504': [
    'GatewayTimeout',
    errorResponse('The service behind the gateway did not answer in time.', {
      timeout: { summary: 'Service too slow', message: errorCatalog.gatewayTimeout.message },
    }),
  ],
}

/** The errors of every operation; 413 is added where there is a body, 409 where the service declares it. */
const COMMON_ERRORS = ['400', '401', '403', '404', '429', '502', '503', '504'] as const

function responseRef(status: string): Json {
  return { $ref: `#/components/responses/${ERROR_RESPONSES[status]![0]}` }
}

const DESCRIPTION = `The scoped API of an agency and its sub-accounts. Every path needs an API key, and the key alone decides who the caller is, which tenant a request acts on, and which paths it may reach.

## Keys

A key looks like \`sak_live_\` followed by 49 letters and digits. Send it in exactly one of two ways:

- \`Authorization: Bearer <key>\` (the scheme is case-insensitive), or
- \`x-api-key: <key>\`.

Both headers at once, a header sent twice, another scheme or an empty value is refused with 401, as is a key that is mistyped (it carries a checksum), unknown, revoked, deleted or expired.

A key has a scope, and each path takes one scope (\`x-scope\` on every operation):

| scope | reaches | acts on |
|---|---|---|
| \`AGENCY\` | \`/v1/agency\`, \`/v1/agency/sub-accounts\`, … | the key's agency |
| \`SUB-ACCOUNT\` | \`/v1/agents\`, \`/v1/contacts\`, \`/v1/calls\` | the key's sub-account |

A key of the other scope gets 403. The tenant comes from the key alone: \`agency_id\` and \`sub_account_id\` are removed from queries and from top-level body fields.

## Permissions

A key may be restricted to some permissions of its scope. Each operation names the one it needs (\`x-permission\`): \`<resource>:read\` for GET, HEAD and OPTIONS, \`<resource>:write\` for every other method, and \`:write\` includes \`:read\`. A key with \`["calls:read"]\` reads calls and nothing else; a restricted key without the permission an operation needs gets 403 \`This API key does not have the permission this request needs\`. A key without a list (\`permissions: null\`) has every permission of its scope.

## Errors

Every error is \`{"success": false, "message": "…"}\` with \`Content-Type: application/json\`:

| status | when |
|---|---|
| 400 | invalid input; the message names the field (\`body.name is required\`) |
| 401 | \`Invalid or missing API key\`, or \`Invalid or revoked API key\` |
| 403 | \`This API key does not have access to this resource\`, the key's address allowlist, or a permission the key lacks |
| 404 | no such path, or no such item for this key (another tenant's id is answered alike) |
| 405 | a method the path does not take; \`Allow\` lists the ones it does |
| 408, 414, 431 | a request too slow, a target over 8 KiB, headers over 16 KiB |
| 409 | the change conflicts with the current state |
| 413 | a body over 1 MiB |
| 429 | too many failed authentications, or a rate limit; retry after \`Retry-After\` seconds |
| 502, 503, 504 | the service behind the gateway is unreachable, busy or too slow; retry (a 503 after \`Retry-After\` seconds) |

Every response carries \`x-request-id\`, the id the gateway logged it under. On a rate-limited route, every answer after the limits were counted carries \`RateLimit\` and \`RateLimit-Policy\` (draft-ietf-httpapi-ratelimit-headers).

## Lists

Lists take \`limit\` (1 to ${MAX_PAGE_LIMIT}, default ${DEFAULT_PAGE_LIMIT}) and \`cursor\`, and answer \`{"success": true, "data": […], "pagination": {"limit", "nextCursor", "hasMore"}}\`. Pass \`nextCursor\` as \`cursor\` for the next page; it is \`null\` on the last one. Items are listed oldest first (the audit trail, \`/v1/agency/audit-events\`, newest first) and a walk never skips or repeats one.

## Bodies

Bodies are JSON, validated strictly: an unknown field, a wrong type or an empty PATCH is refused with 400 naming the field. The one exception is the tenant: \`agency_id\` and \`sub_account_id\` at a body's top level are removed by the gateway and ignored, never refused. Revoking a key needs no body (an empty object is accepted), and rolling one takes an optional \`{"graceSeconds"}\`. POST answers 201 with the item (revoke: 200), PATCH 200 with the updated item, DELETE 204.`

/** The project's version and license (an SPDX identifier), as package.json gives them. */
export interface ProjectInfo {
  version: string
  license: string
}

function baseDocument({ version, license }: ProjectInfo): OpenApiDocument {
  const responses: Json = {}
  for (const [, [name, response]] of Object.entries(ERROR_RESPONSES)) responses[name] = response
  return {
    openapi: '3.1.0',
    info: { title: 'Scoped agency API', version, description: DESCRIPTION, license: { name: license, identifier: license } },
    // Relative: the API is at the origin that serves this document (the gateway's /openapi.json).
    servers: [{ url: '/', description: 'The gateway that serves this document.' }],
    tags: [],
    security: [{ bearerAuth: [] }, { apiKeyHeader: [] }],
    paths: {},
    components: {
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'sak_live_…',
          description: '`Authorization: Bearer <key>`. Send exactly one of this and `x-api-key`; both at once are refused with 401.',
        },
        apiKeyHeader: {
          type: 'apiKey',
          in: 'header',
          name: 'x-api-key',
          description: '`x-api-key: <key>`. Send exactly one of this and `Authorization: Bearer`; both at once are refused with 401.',
        },
      },
      schemas: {
        ErrorEnvelope: {
          type: 'object',
          description: 'Every error, whoever answers it.',
          properties: { success: { const: false }, message: { type: 'string' } },
          required: ['success', 'message'],
          additionalProperties: false,
        },
      },
      responses,
      headers: HEADERS,
    },
  }
}

// ---------------------------------------------------------------- the merge

export interface MergeResult {
  document: OpenApiDocument
  /** What does not fit: an operation no route reaches, a route with no operation, a scope the service disagrees with. */
  problems: string[]
}

/** The tag of the leak reports' operations (route-map.ts, LEAK_REPORT_PATHS). */
export const LEAK_REPORT_TAG = 'leak-reports'

function tagOf(route: ScopedRoute | ReportRoute): string {
  if (route.auth === 'none') return LEAK_REPORT_TAG
  return route.prefix
    .split('/')
    .filter((segment) => segment !== '' && segment !== 'v1')
    .join('/')
}

/** The audit trail's filters: what each means, and its format (the service checks it and answers 400 naming the parameter). */
const QUERY_PARAMETERS: Record<string, { description: string; format?: string }> = {
  type: { description: 'Only events of this type.' },
  keyId: { description: 'Only events about this key.', format: 'uuid' },
  subAccountId: { description: 'Only events about this sub-account.', format: 'uuid' },
  since: { description: 'Only events at or after this time (inclusive), e.g. `2026-01-31T00:00:00Z`.', format: 'date-time' },
  until: { description: 'Only events before this time (exclusive); must be later than `since`.', format: 'date-time' },
}

function parameterDescriptions(parameters: Json[] | undefined): Json[] | undefined {
  return parameters?.map((parameter) => {
    const schema = { ...((parameter['schema'] as Json | undefined) ?? {}) }
    const name = parameter['name']
    if (parameter['in'] === 'query' && name === 'limit')
      return { ...parameter, description: `Items per page, 1 to ${MAX_PAGE_LIMIT} (default ${DEFAULT_PAGE_LIMIT}).`, schema }
    if (parameter['in'] === 'query' && name === 'cursor')
      return { ...parameter, description: 'Where to go on: the `nextCursor` of the previous page. Opaque.', schema }
    const query = parameter['in'] === 'query' && typeof name === 'string' ? QUERY_PARAMETERS[name] : undefined
    if (query !== undefined)
      return { ...parameter, description: query.description, schema: { ...schema, ...(query.format === undefined ? {} : { format: query.format }) } }
    if (parameter['in'] === 'path' && typeof name === 'string' && /(^id|Id)$/.test(name)) {
      return {
        ...parameter,
        description: "An id. One that does not exist, is not a UUID or is another tenant's is answered 404 alike.",
        schema: { ...schema, format: schema['format'] ?? 'uuid' },
      }
    }
    return parameter
  })
}

/** The request body; optional where the route says so (OPTIONAL_BODY_EXTENSION: revoke, roll), since @fastify/swagger marks every body required. */
function requestBodyOf(own: Json): Json {
  const body = own['requestBody'] as Json
  return own[OPTIONAL_BODY_EXTENSION] === true ? { ...body, required: false } : body
}

/** What an operation says of the key it needs. */
function access(
  route: ScopedRoute | ReportRoute,
  method: string,
): Pick<Operation, typeof SCOPE_EXTENSION | typeof PERMISSION_EXTENSION | 'security'> & { sentence: string } {
  if (route.auth === 'none') return { security: [], sentence: 'Needs no API key.' }
  const permission = route.permission === undefined ? undefined : isReadMethod(method.toUpperCase()) ? route.permission.read : route.permission.write
  if (permission === undefined) return { [SCOPE_EXTENSION]: route.scope, sentence: `Needs a key of scope \`${route.scope}\`.` }
  return {
    [SCOPE_EXTENSION]: route.scope,
    [PERMISSION_EXTENSION]: permission,
    sentence: `Needs a key of scope \`${route.scope}\`; a restricted key needs the permission \`${permission}\`.`,
  }
}

function mergeOperation(method: string, path: string, route: ScopedRoute | ReportRoute, own: Json): Operation {
  const names = operationNames(method, path)
  const responses: Record<string, Json> = {}
  const ownResponses = (own['responses'] as Record<string, Json> | undefined) ?? {}
  for (const [status, response] of Object.entries(ownResponses)) {
    if (/^[23]/.test(status)) {
      // @fastify/swagger answers "200: Default Response" for a route without response schemas: undocumented, not a 200.
      if (response['description'] === 'Default Response' && response['content'] === undefined) continue
      // A 204 has no body.
      const success = status === '204' ? { description: response['description'] } : response
      responses[status] = { ...success, headers: { ...RATE_LIMIT, ...REQUEST_ID } }
    } else if (status === '401' && route.auth === 'none') {
      // Not the key's 401 (no WWW-Authenticate): GitHub's signature, described by the service itself.
      responses[status] = { ...response, headers: REQUEST_ID }
    } else if (ERROR_RESPONSES[status] !== undefined) {
      responses[status] = { ...responseRef(status), description: response['description'] }
    }
  }
  if (!Object.keys(responses).some((status) => /^2/.test(status))) responses['2XX'] = { description: 'Success' }
  // Without a key, no key can be refused (401) or be of the wrong scope (403).
  const errors: string[] = COMMON_ERRORS.filter((status) => route.auth === 'key' || (status !== '401' && status !== '403'))
  if (own['requestBody'] !== undefined) errors.push('413')
  for (const status of errors.sort()) responses[status] ??= responseRef(status)
  const sorted = Object.fromEntries(Object.entries(responses).sort(([a], [b]) => a.localeCompare(b)))
  const parameters = parameterDescriptions(own['parameters'] as Json[] | undefined)
  const { sentence, ...needs } = access(route, method)
  const operation: Operation = {
    operationId: typeof own['operationId'] === 'string' ? own['operationId'] : names.operationId,
    summary: typeof own['summary'] === 'string' ? own['summary'] : names.summary,
    description: `${typeof own['description'] === 'string' ? `${own['description']}\n\n` : ''}${sentence}`,
    tags: [tagOf(route)],
    ...needs,
    ...(parameters === undefined ? {} : { parameters }),
    ...(own['requestBody'] === undefined ? {} : { requestBody: requestBodyOf(own) }),
    responses: sorted,
  }
  const page = sorted['200']?.['content'] as Record<string, { schema?: Json }> | undefined
  const pageSchema = page?.['application/json']?.schema
  if (method === 'get' && (pageSchema?.['properties'] as Json | undefined)?.['pagination'] !== undefined) {
    // Pagination as an OpenAPI link: the same operation again, with the answer's nextCursor as its cursor.
    sorted['200'] = {
      ...sorted['200'],
      links: {
        nextPage: {
          operationId: operation.operationId,
          parameters: { cursor: '$response.body#/pagination/nextCursor' },
          description: 'The next page, while `hasMore` is true.',
        },
      },
    }
  }
  return operation
}

/** Merges the services' documents for the routes of `routes`. */
export function mergeApiDocument(routes: RouteMap, services: readonly ServiceDocument[], project: ProjectInfo): MergeResult {
  const document = baseDocument(project)
  const problems: string[] = []
  const reached = new Set<ScopedRoute>()
  const operationIds = new Set<string>()
  const paths: Record<string, Record<string, Operation>> = {}
  const names = new SchemaNames(document.components['schemas'] as Json)
  for (const service of services) {
    for (const [name, schema] of Object.entries(service.document.components?.schemas ?? {})) {
      const schemas = document.components['schemas'] as Json
      if (schemas[name] !== undefined) problems.push(`${service.audience}: component schema ${name} is defined twice`)
      schemas[name] = schema
    }
    for (const [path, item] of Object.entries(service.document.paths ?? {})) {
      for (const method of METHODS) {
        const own = item[method] as Json | undefined
        if (own === undefined) continue
        const route = matchRoute(routes, path)
        if (route?.auth === 'none' && route.prefix === path && route.audience === service.audience) {
          const operation = mergeOperation(method, path, route, own)
          names.nameOperation(method, path, operation)
          ;(paths[path] ??= {})[method] = operation
          continue
        }
        if (route === undefined || route.auth !== 'key' || route.audience !== service.audience) {
          problems.push(`${method.toUpperCase()} ${path} (${service.audience}) is reached by no route of the route map`)
          continue
        }
        if (own[SCOPE_EXTENSION] !== route.scope) {
          problems.push(
            `${method.toUpperCase()} ${path}: the route map gives scope ${route.scope}, ${service.audience} requires ${String(own[SCOPE_EXTENSION])}`,
          )
        }
        reached.add(route)
        const operation = mergeOperation(method, path, route, own)
        names.nameOperation(method, path, operation)
        if (operationIds.has(operation.operationId)) problems.push(`operation id ${operation.operationId} is used twice`)
        operationIds.add(operation.operationId)
        ;(paths[path] ??= {})[method] = operation
      }
    }
  }
  const tags: Json[] = []
  for (const route of routes.routes) {
    if (route.auth !== 'key') continue
    if (!reached.has(route)) problems.push(`route ${route.prefix} reaches no operation of its backend (${route.audience})`)
    const tag = tagOf(route)
    if (!tags.some((existing) => existing['name'] === tag))
      tags.push({
        name: tag,
        description:
          route.permission === undefined
            ? `\`${route.prefix}\`: needs a key of scope \`${route.scope}\`.`
            : `\`${route.prefix}\`: needs a key of scope \`${route.scope}\`; a restricted key needs \`${route.permission.read}\` to read, \`${route.permission.write}\` to change.`,
      })
  }
  if (routes.routes.some((route) => route.auth === 'none'))
    tags.push({ name: LEAK_REPORT_TAG, description: 'Reporting leaked keys, so they are revoked at once: needs no key.' })
  problems.push(...names.problems)
  document['tags'] = tags
  document.paths = Object.fromEntries(Object.entries(paths).sort(([a], [b]) => a.localeCompare(b)))
  return { document, problems }
}

/** The project's version and license, as the document's. */
export function projectInfo(): ProjectInfo {
  const { version, license } = JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as { version: string; license?: string }
  if (license === undefined) throw new Error('package.json names no license')
  return { version, license }
}

/** Builds the document from the services and a routes file (deploy/routes.yaml by default). */
export async function buildApiDocument(routesFile: string = defaultRoutesFile): Promise<MergeResult> {
  const routes = parseRouteMap(readFileSync(routesFile, 'utf8'), routesFile)
  return mergeApiDocument(routes, await serviceDocuments(), projectInfo())
}

/** The file's text: stable (paths sorted), two-space JSON and a final newline. */
export function formatApiDocument(document: OpenApiDocument): string {
  return `${JSON.stringify(document, null, 2)}\n`
}
