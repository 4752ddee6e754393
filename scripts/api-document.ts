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
import { SCOPE_EXTENSION } from '@scoped/shared/api-document'
import { createPool } from '@scoped/shared/db'
import { errorCatalog } from '@scoped/shared/errors'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { createLogger } from '@scoped/shared/logger'
import { DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT } from '@scoped/shared/pagination'
import { AGENCY_SERVICE_AUDIENCE, RESOURCE_SERVICE_AUDIENCE } from '@scoped/shared/tenant-signature'
import type { RouteMap, ScopedRoute } from '@scoped/gateway/route-map'
import { matchRoute, parseRouteMap } from '@scoped/gateway/route-map'
import { projectRoot } from '../test/helpers/processes.js'

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
  [SCOPE_EXTENSION]: string
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

function words(segment: string): string[] {
  return segment.split(/[-_]/).filter((word) => word !== '')
}

function pascal(segment: string): string {
  return words(segment)
    .map((word) => word[0]!.toUpperCase() + word.slice(1))
    .join('')
}

function singular(segment: string): string {
  if (segment.endsWith('ies')) return `${segment.slice(0, -3)}y`
  if (segment.endsWith('s') && !segment.endsWith('ss')) return segment.slice(0, -1)
  return segment
}

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

function errorResponse(description: string, examples: Record<string, { summary: string; message: string }>, headers?: Json): Json {
  return { description, ...(headers === undefined ? {} : { headers }), content: errorContent(examples) }
}

const RETRY_AFTER = { $ref: '#/components/headers/Retry-After' }

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
      { 'WWW-Authenticate': { description: 'Always `Bearer`.', schema: { type: 'string' } } },
    ),
  ],
  '403': [
    'Forbidden',
    errorResponse('The key is valid but may not do this.', {
      scope: { summary: 'A key of the other scope', message: errorCatalog.scopeMismatch.message },
      address: { summary: 'A key used from outside its address allowlist', message: 'This API key cannot be used from this address' },
    }),
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
      {
        'Retry-After': RETRY_AFTER,
        RateLimit: { description: 'draft-ietf-httpapi-ratelimit-headers: the limit that applied and what is left of it.', schema: { type: 'string' } },
        'RateLimit-Policy': { description: 'draft-ietf-httpapi-ratelimit-headers: the policy of that limit.', schema: { type: 'string' } },
      },
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
      { 'Retry-After': RETRY_AFTER },
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

## Errors

Every error is \`{"success": false, "message": "…"}\` with \`Content-Type: application/json\`:

| status | when |
|---|---|
| 400 | invalid input; the message names the field (\`body.name is required\`) |
| 401 | \`Invalid or missing API key\`, or \`Invalid or revoked API key\` |
| 403 | \`This API key does not have access to this resource\`, or the key's address allowlist |
| 404 | no such path, or no such item for this key (another tenant's id is answered alike) |
| 405, 408, 414, 431 | a method the API does not take; a request too slow, a target over 8 KiB, headers over 16 KiB |
| 409 | the change conflicts with the current state |
| 413 | a body over 1 MiB |
| 429 | too many failed authentications, or a rate limit; retry after \`Retry-After\` seconds |
| 502, 503, 504 | the service behind the gateway is unreachable, busy or too slow; retry |

## Lists

Lists take \`limit\` (1 to ${MAX_PAGE_LIMIT}, default ${DEFAULT_PAGE_LIMIT}) and \`cursor\`, and answer \`{"success": true, "data": […], "pagination": {"limit", "nextCursor", "hasMore"}}\`. Pass \`nextCursor\` as \`cursor\` for the next page; it is \`null\` on the last one. Items are listed oldest first and a walk never skips or repeats one.

## Bodies

Bodies are JSON, validated strictly: an unknown field, a wrong type or an empty PATCH is refused with 400 naming the field. POST answers 201 with the item, PATCH 200 with the updated item, DELETE 204.`

function baseDocument(version: string): OpenApiDocument {
  const responses: Json = {}
  for (const [, [name, response]] of Object.entries(ERROR_RESPONSES)) responses[name] = response
  return {
    openapi: '3.1.0',
    info: { title: 'Scoped agency API', version, description: DESCRIPTION },
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
      headers: {
        'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer', minimum: 0 } },
      },
    },
  }
}

// ---------------------------------------------------------------- the merge

export interface MergeResult {
  document: OpenApiDocument
  /** What does not fit: an operation no route reaches, a route with no operation, a scope the service disagrees with. */
  problems: string[]
}

function tagOf(route: ScopedRoute): string {
  return route.prefix
    .split('/')
    .filter((segment) => segment !== '' && segment !== 'v1')
    .join('/')
}

function parameterDescriptions(parameters: Json[] | undefined): Json[] | undefined {
  return parameters?.map((parameter) => {
    const schema = { ...((parameter['schema'] as Json | undefined) ?? {}) }
    const name = parameter['name']
    if (parameter['in'] === 'query' && name === 'limit')
      return { ...parameter, description: `Items per page, 1 to ${MAX_PAGE_LIMIT} (default ${DEFAULT_PAGE_LIMIT}).`, schema }
    if (parameter['in'] === 'query' && name === 'cursor')
      return { ...parameter, description: 'Where to go on: the `nextCursor` of the previous page. Opaque.', schema }
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

function mergeOperation(method: string, path: string, route: ScopedRoute, own: Json): Operation {
  const names = operationNames(method, path)
  const responses: Record<string, Json> = {}
  const ownResponses = (own['responses'] as Record<string, Json> | undefined) ?? {}
  for (const [status, response] of Object.entries(ownResponses)) {
    if (/^[23]/.test(status)) {
      // @fastify/swagger answers "200: Default Response" for a route without response schemas: undocumented, not a 200.
      if (response['description'] === 'Default Response' && response['content'] === undefined) continue
      // A 204 has no body.
      responses[status] = status === '204' ? { description: response['description'] } : response
    } else if (ERROR_RESPONSES[status] !== undefined) {
      responses[status] = { ...responseRef(status), description: response['description'] }
    }
  }
  if (!Object.keys(responses).some((status) => /^2/.test(status))) responses['2XX'] = { description: 'Success' }
  const errors: string[] = [...COMMON_ERRORS]
  if (own['requestBody'] !== undefined) errors.push('413')
  for (const status of errors.sort()) responses[status] ??= responseRef(status)
  const sorted = Object.fromEntries(Object.entries(responses).sort(([a], [b]) => a.localeCompare(b)))
  const parameters = parameterDescriptions(own['parameters'] as Json[] | undefined)
  const operation: Operation = {
    operationId: typeof own['operationId'] === 'string' ? own['operationId'] : names.operationId,
    summary: typeof own['summary'] === 'string' ? own['summary'] : names.summary,
    description: `${typeof own['description'] === 'string' ? `${own['description']}\n\n` : ''}Needs a key of scope \`${route.scope}\`.`,
    tags: [tagOf(route)],
    [SCOPE_EXTENSION]: route.scope,
    ...(parameters === undefined ? {} : { parameters }),
    ...(own['requestBody'] === undefined ? {} : { requestBody: own['requestBody'] as Json }),
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
export function mergeApiDocument(routes: RouteMap, services: readonly ServiceDocument[], version: string): MergeResult {
  const document = baseDocument(version)
  const problems: string[] = []
  const reached = new Set<ScopedRoute>()
  const operationIds = new Set<string>()
  const paths: Record<string, Record<string, Operation>> = {}
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
      tags.push({ name: tag, description: `\`${route.prefix}\`: needs a key of scope \`${route.scope}\`.` })
  }
  document['tags'] = tags
  document.paths = Object.fromEntries(Object.entries(paths).sort(([a], [b]) => a.localeCompare(b)))
  return { document, problems }
}

/** The project's version, as the document's. */
export function projectVersion(): string {
  return (JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as { version: string }).version
}

/** Builds the document from the services and a routes file (deploy/routes.yaml by default). */
export async function buildApiDocument(routesFile: string = defaultRoutesFile): Promise<MergeResult> {
  const routes = parseRouteMap(readFileSync(routesFile, 'utf8'), routesFile)
  return mergeApiDocument(routes, await serviceDocuments(), projectVersion())
}

/** The file's text: stable (paths sorted), two-space JSON and a final newline. */
export function formatApiDocument(document: OpenApiDocument): string {
  return `${JSON.stringify(document, null, 2)}\n`
}
