/**
 * The API description, deploy/openapi.json: regenerated from the services'
 * own route schemas and the default route map, it must equal the committed
 * file (a route added without `npm run openapi` fails here); it is a valid
 * OpenAPI 3.1 document whose references all resolve; every scoped route of
 * deploy/routes.yaml and every /v1 operation of both services is in it, with
 * the scope the route map gives (and the service itself requires); every
 * operation carries both key schemes, the errors in the envelope and, for
 * lists, the pagination; and it names nothing a caller without a key should
 * not see.
 */
import { withoutTlsFiles } from '../deploy/route-files.js'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { Validator } from '@seriousme/openapi-schema-validator'
import { SCOPE_EXTENSION } from '@scoped/shared/api-document'
import { errorCatalog } from '@scoped/shared/errors'
import { LEAK_REPORT_PATHS, matchRoute, parseRouteMap } from '@scoped/gateway/route-map'
import type { OpenApiDocument, Operation, ServiceDocument } from '../../scripts/api-document.js'
import {
  buildApiDocument,
  defaultRoutesFile,
  formatApiDocument,
  mergeApiDocument,
  openApiFile,
  operationNames,
  serviceDocuments,
} from '../../scripts/api-document.js'
import { projectRoot } from '../helpers/processes.js'

type Json = Record<string, unknown>

const committed = readFileSync(openApiFile, 'utf8')
const document = JSON.parse(committed) as OpenApiDocument
const routes = parseRouteMap(readFileSync(defaultRoutesFile, 'utf8'), defaultRoutesFile)

function operations(doc: OpenApiDocument): Array<{ method: string; path: string; operation: Operation }> {
  return Object.entries(doc.paths).flatMap(([path, item]) => Object.entries(item).map(([method, operation]) => ({ method, path, operation })))
}

/** Follows a local reference (#/components/…); undefined when it points nowhere. */
function resolve(ref: string): unknown {
  if (!ref.startsWith('#/')) return undefined
  let node: unknown = document
  for (const part of ref.slice(2).split('/')) {
    if (typeof node !== 'object' || node === null) return undefined
    node = (node as Json)[part.replaceAll('~1', '/').replaceAll('~0', '~')]
  }
  return node
}

function* references(node: unknown): Generator<string> {
  if (Array.isArray(node)) for (const item of node) yield* references(item)
  else if (typeof node === 'object' && node !== null) {
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string') yield value
      else yield* references(value)
    }
  }
}

function response(operation: Operation, status: string): Json | undefined {
  const entry = operation.responses[status]
  if (entry === undefined) return undefined
  return typeof entry['$ref'] === 'string' ? (resolve(entry['$ref']) as Json) : entry
}

let services: ServiceDocument[] = []

t.before(async () => {
  services = await serviceDocuments()
})

t.test('deploy/openapi.json is what npm run openapi writes now', async (t) => {
  const { document: fresh, problems } = await buildApiDocument()
  t.same(problems, [], 'the services and the route map agree')
  t.ok(formatApiDocument(fresh) === committed, 'deploy/openapi.json is current (run npm run openapi after changing a route, its schemas or deploy/routes.yaml)')
})

t.test('a valid OpenAPI 3.1 document', async (t) => {
  const validator = new Validator()
  const result = await validator.validate(document)
  t.equal(validator.version, '3.1', 'validated against the 3.1 schema')
  t.ok(result.valid, `valid: ${JSON.stringify(result.errors ?? null).slice(0, 2000)}`)
  t.equal(document.openapi, '3.1.0')
  const unresolved = [...new Set(references(document))].filter((ref) => resolve(ref) === undefined)
  t.same(unresolved, [], 'every $ref resolves')
  const ids = operations(document).map(({ operation }) => operation.operationId)
  t.equal(new Set(ids).size, ids.length, 'operation ids are unique')
})

t.test('every scoped route of deploy/routes.yaml, and every /v1 operation of the services, with its scope', async (t) => {
  const published = operations(document)
  for (const route of routes.routes) {
    if (route.auth !== 'key') continue
    const reached = published.filter(({ path }) => matchRoute(routes, path) === route)
    t.ok(reached.length > 0, `${route.prefix} has operations`)
    for (const { method, path, operation } of reached) {
      t.equal(operation[SCOPE_EXTENSION], route.scope, `${method.toUpperCase()} ${path}: x-scope ${route.scope}`)
      t.same(operation.tags, [route.prefix.replace(/^\/v1\//, '')], `${method.toUpperCase()} ${path}: tagged by its route`)
    }
  }
  let count = 0
  for (const service of services) {
    for (const [path, item] of Object.entries(service.document.paths ?? {})) {
      t.ok(path.startsWith('/v1/'), `${service.audience} publishes only /v1 (${path})`)
      for (const [method, own] of Object.entries(item)) {
        count++
        const operation = document.paths[path]?.[method]
        t.ok(operation, `${method.toUpperCase()} ${path} of ${service.audience} is in the document`)
        // A leak report needs no key: no scope, whatever its service's /v1 routes require.
        const expected = (LEAK_REPORT_PATHS as readonly string[]).includes(path) ? undefined : own[SCOPE_EXTENSION]
        t.equal(operation?.[SCOPE_EXTENSION], expected, `${method.toUpperCase()} ${path}: the scope ${service.audience} requires`)
      }
    }
  }
  t.equal(published.length, count, 'and nothing else')
})

t.test('the two key schemes, exactly one of them, on every operation', async (t) => {
  const schemes = (document.components['securitySchemes'] ?? {}) as Record<string, Json>
  t.match(schemes['bearerAuth'], { type: 'http', scheme: 'bearer' })
  t.match(schemes['apiKeyHeader'], { type: 'apiKey', in: 'header', name: 'x-api-key' })
  t.equal(Object.keys(schemes).length, 2)
  // Alternatives (either requirement object), never both in one object (which would mean both at once).
  t.same(document['security'], [{ bearerAuth: [] }, { apiKeyHeader: [] }])
  for (const { path, operation } of operations(document)) {
    if ((LEAK_REPORT_PATHS as readonly string[]).includes(path)) t.same(operation['security'], [], `${operation.operationId} needs no key`)
    else t.equal(operation['security'], undefined, `${operation.operationId} inherits the document's schemes`)
  }
  t.match(String(schemes['bearerAuth']?.['description']), /exactly one/)
})

t.test('every error in the envelope, with the exact messages', async (t) => {
  const envelope = resolve('#/components/schemas/ErrorEnvelope') as Json
  t.same(envelope['required'], ['success', 'message'])
  const examplesOf = (status: string, operation: Operation): string[] => {
    const content = (response(operation, status)?.['content'] as Record<string, Json> | undefined)?.['application/json']
    t.same(content?.['schema'], { $ref: '#/components/schemas/ErrorEnvelope' }, `${operation.operationId} ${status} is the envelope`)
    return Object.values((content?.['examples'] ?? {}) as Record<string, { value: { success: boolean; message: string } }>).map((example) => {
      t.equal(example.value.success, false)
      return example.value.message
    })
  }
  const seen = new Set<string>()
  for (const { method, path, operation } of operations(document)) {
    // A leak report needs no key: no key can be refused (401) or be of the wrong scope (403).
    const keyed = !(LEAK_REPORT_PATHS as readonly string[]).includes(path)
    for (const status of ['400', '401', '403', '404', '429', '502', '503', '504'].filter((status) => keyed || (status !== '401' && status !== '403'))) {
      t.ok(operation.responses[status], `${operation.operationId} answers ${status}`)
      examplesOf(status, operation)
      seen.add(status)
    }
    if (operation.requestBody !== undefined) {
      examplesOf('413', operation)
      seen.add('413')
    }
    if (operation.responses['409'] !== undefined) {
      examplesOf('409', operation)
      seen.add('409')
    }
    t.ok(
      Object.keys(operation.responses).some((status) => status.startsWith('2')),
      `${operation.operationId} has a success`,
    )
    if (method === 'delete' && operation.responses['204'] !== undefined) t.equal(operation.responses['204']['content'], undefined, 'a 204 has no body')
    t.ok((response(operation, '429')?.['headers'] as Json | undefined)?.['Retry-After'], '429 names Retry-After')
    if (!keyed) continue
    const unauthorized = examplesOf('401', operation)
    t.ok(
      unauthorized.includes(errorCatalog.missingKey.message) && unauthorized.includes(errorCatalog.revokedKey.message),
      `${operation.operationId}: 401 with both messages`,
    )
    t.ok(response(operation, '401')?.['headers'], '401 names WWW-Authenticate')
    t.ok(examplesOf('403', operation).includes(errorCatalog.scopeMismatch.message), '403 with the scope message')
  }
  t.same([...seen].sort(), ['400', '401', '403', '404', '409', '413', '429', '502', '503', '504'])
  t.ok(document.paths['/v1/agents/{id}']?.['delete']?.responses['409'], 'deleting an agent that calls use: 409')
})

t.test('lists: limit, cursor, and the page with nextCursor', async (t) => {
  const lists = operations(document).filter(
    ({ method, path }) => method === 'get' && ['/v1/agency/sub-accounts', '/v1/agents', '/v1/contacts', '/v1/calls'].includes(path),
  )
  t.equal(lists.length, 4)
  for (const { operation } of lists) {
    const parameters = (operation.parameters ?? []) as Json[]
    t.match(
      parameters.find((parameter) => parameter['name'] === 'limit'),
      { in: 'query', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
    )
    t.match(
      parameters.find((parameter) => parameter['name'] === 'cursor'),
      { in: 'query', schema: { type: 'string' } },
    )
    const ok = operation.responses['200']!
    const page = ((ok['content'] as Record<string, Json>)['application/json']!['schema'] ?? {}) as Json
    const schema = resolve(String(page['$ref'])) as Json
    t.match(schema, {
      properties: { data: { type: 'array' }, pagination: { $ref: '#/components/schemas/Pagination' } },
      required: ['success', 'data', 'pagination'],
    })
    t.match(resolve('#/components/schemas/Pagination'), { properties: { nextCursor: { type: ['string', 'null'] }, hasMore: { type: 'boolean' } } })
    t.match(ok['links'], { nextPage: { operationId: operation.operationId, parameters: { cursor: '$response.body#/pagination/nextCursor' } } })
  }
})

t.test('nothing for callers without a key to see', async (t) => {
  // GitHub's own header is named where GitHub's alerts are described; no internal one is.
  const text = committed.toLowerCase().replaceAll('github-public-key-signature', 'github-public-key-…')
  for (const secret of ['x-tenant', 'console', '/healthz', '/readyz', 'signature', '127.0.0.1', 'localhost', 'http://']) {
    t.notOk(text.includes(secret), `no ${JSON.stringify(secret)}`)
  }
  t.same(
    document['servers'],
    [{ url: '/', description: 'The gateway that serves this document.' }],
    'the one server is relative: wherever the document is served',
  )
  for (const file of ['deploy/routes.yaml', 'deploy/routes.compose.yaml', 'deploy/kubernetes/routes.yaml']) {
    // The internal TLS files are the containers' (withoutTlsFiles): only the upstreams matter here.
    const map = parseRouteMap(withoutTlsFiles(readFileSync(join(projectRoot, file), 'utf8'), file), file)
    for (const route of map.routes) t.notOk(text.includes(new URL(route.upstream).host.toLowerCase()), `${file}: no upstream ${route.upstream}`)
  }
})

t.test('the merge refuses what does not fit the route map', async (t) => {
  const narrow = parseRouteMap(
    'routes:\n  - { prefix: /v1/agents, scope: AGENCY, upstream: "http://127.0.0.1:1", audience: resource-service }\n  - { prefix: /v1/nothing, scope: AGENCY, upstream: "http://127.0.0.1:1" }\n',
    'test',
  )
  const { document: merged, problems } = mergeApiDocument(narrow, services, { version: '0', license: 'MIT' })
  t.ok(
    problems.some((problem) => /^GET \/v1\/agents: the route map gives scope AGENCY, resource-service requires SUB-ACCOUNT/.test(problem)),
    'a scope the service does not require',
  )
  t.ok(
    problems.some((problem) => /^GET \/v1\/contacts \(resource-service\) is reached by no route/.test(problem)),
    'an operation no route reaches',
  )
  t.ok(
    problems.some((problem) => /^route \/v1\/nothing reaches no operation/.test(problem)),
    'a route that reaches nothing',
  )
  t.notOk(merged.paths['/v1/contacts'], 'an unreachable operation is left out')
})

t.test('operation names', async (t) => {
  const cases: Array<[string, string, string, string]> = [
    ['get', '/v1/agency', 'getAgency', 'Get the agency'],
    ['get', '/v1/agents', 'listAgents', 'List agents'],
    ['post', '/v1/agents', 'createAgent', 'Create an agent'],
    ['get', '/v1/agents/{id}', 'getAgent', 'Get an agent'],
    ['patch', '/v1/calls/{id}', 'updateCall', 'Update a call'],
    ['delete', '/v1/agency/sub-accounts/{id}', 'deleteAgencySubAccount', 'Delete a sub-account'],
    ['post', '/v1/agency/sub-accounts/{id}/keys/{keyId}/roll', 'rollAgencySubAccountKey', 'Roll a key'],
  ]
  for (const [method, path, operationId, summary] of cases) t.same(operationNames(method, path), { operationId, summary }, `${method} ${path}`)
})

t.test('a client names its types: the items, their pages and the request bodies are component schemas', async (t) => {
  const schemas = document.components['schemas'] as Record<string, Json>
  for (const name of ['Agency', 'SubAccount', 'KeyItem', 'CreatedKeyItem', 'AuditEvent', 'Agent', 'Contact', 'Call', 'Pagination']) t.ok(schemas[name], name)
  for (const name of ['SubAccount', 'KeyItem', 'AuditEvent', 'Agent', 'Contact', 'Call']) {
    t.match(schemas[`${name}Page`], {
      properties: { data: { items: { $ref: `#/components/schemas/${name}` } }, pagination: { $ref: '#/components/schemas/Pagination' } },
    })
  }
  const json = (operation: Operation | undefined, status: string): Json | undefined =>
    ((operation?.responses[status]?.['content'] as Record<string, Json> | undefined)?.['application/json']?.['schema'] as Json | undefined) ?? undefined
  t.same(json(document.paths['/v1/agents']?.['get'], '200'), { $ref: '#/components/schemas/AgentPage' })
  t.match(json(document.paths['/v1/agents/{id}']?.['get'], '200'), { properties: { data: { $ref: '#/components/schemas/Agent' } } })
  t.match(json(document.paths['/v1/agency/sub-accounts/{id}/keys']?.['post'], '201'), { properties: { data: { $ref: '#/components/schemas/CreatedKeyItem' } } })
  t.match(schemas['CreatedKeyItem'], { required: ['id', 'name', 'scope', 'status'], properties: { key: { type: 'string' } } })
  const body = (path: string, method: string): Json | undefined => document.paths[path]?.[method]?.requestBody
  t.match(body('/v1/agents', 'post'), { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/AgentCreate' } } } })
  t.match(body('/v1/agents/{id}', 'patch'), { content: { 'application/json': { schema: { $ref: '#/components/schemas/AgentUpdate' } } } })
  t.match(body('/v1/agency/sub-accounts/{id}/keys/{keyId}/roll', 'post'), {
    required: false,
    content: { 'application/json': { schema: { $ref: '#/components/schemas/KeyRoll' } } },
  })
  t.match(body('/v1/agency/sub-accounts/{id}/keys/{keyId}/revoke', 'post'), { required: false })
  for (const { method, path, operation } of operations(document)) {
    if (operation.requestBody === undefined) continue
    // Actions on an item take an empty body or none: a key's roll and revoke (not the public /v1/credentials/revoke), a webhook endpoint's roll-secret, a redelivery.
    const required = !['/roll', '/keys/{keyId}/revoke', '/roll-secret', '/redeliver'].some((action) => path.endsWith(action))
    t.equal(operation.requestBody['required'], required, `${method.toUpperCase()} ${path}: a body ${required ? 'is required' : 'may be left out'}`)
  }
})

t.test('request bodies say what the gateway does with tenant fields: removed and ignored, never refused', async (t) => {
  const schemas = document.components['schemas'] as Record<string, Json>
  for (const name of ['AgentCreate', 'AgentUpdate', 'SubAccountCreate', 'KeyCreate', 'KeyUpdate', 'KeyRoll', 'KeyRevoke']) {
    const schema = schemas[name]!
    t.equal(schema['additionalProperties'], false, `${name}: other unknown fields are refused (400)`)
    t.match(
      schema['properties'],
      { agency_id: { deprecated: true, description: /Ignored/ }, sub_account_id: { deprecated: true, description: /Ignored/ } },
      name,
    )
  }
})

t.test('the response headers: x-request-id on every answer, Retry-After on every 429 and 503, RateLimit after the limits', async (t) => {
  const headers = document.components['headers'] as Record<string, Json>
  t.match(headers['X-Request-Id'], { required: true })
  t.match(headers['Retry-After'], { required: true, schema: { type: 'integer', minimum: 0 } })
  t.match(headers['RateLimit'], { schema: { type: 'string' } })
  t.match(headers['RateLimit-Policy'], { schema: { type: 'string' } })
  for (const { operation } of operations(document)) {
    for (const status of Object.keys(operation.responses)) {
      const declared = (response(operation, status)?.['headers'] ?? {}) as Record<string, Json>
      t.same(declared['x-request-id'], { $ref: '#/components/headers/X-Request-Id' }, `${operation.operationId} ${status}: x-request-id`)
      if (status === '429' || status === '503')
        t.same(declared['Retry-After'], { $ref: '#/components/headers/Retry-After' }, `${operation.operationId} ${status}: Retry-After`)
      if (/^2/.test(status)) t.ok(declared['RateLimit'] && declared['RateLimit-Policy'], `${operation.operationId} ${status}: RateLimit`)
    }
  }
})

t.test('the audit trail: newest first, its filters described with their formats', async (t) => {
  const operation = document.paths['/v1/agency/audit-events']?.['get']
  const parameters = (operation?.parameters ?? []) as Json[]
  const byName = (name: string): Json | undefined => parameters.find((parameter) => parameter['name'] === name)
  t.match(byName('keyId'), { description: /key/, schema: { format: 'uuid' } })
  t.match(byName('subAccountId'), { description: /sub-account/, schema: { format: 'uuid' } })
  t.match(byName('since'), { description: /inclusive/, schema: { format: 'date-time' } })
  t.match(byName('until'), { description: /exclusive/, schema: { format: 'date-time' } })
  t.match(byName('type'), { description: /type/ })
  t.match(operation?.responses['200']?.['description'], /newest first/)
  t.match(String(document.info['description']), /audit trail.*newest first/)
})

t.test("the license is the project's", async (t) => {
  const project = JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as { license: string }
  t.equal(project.license, 'MIT')
  t.same(document.info['license'], { name: 'MIT', identifier: 'MIT' })
  t.match(readFileSync(join(projectRoot, 'LICENSE'), 'utf8'), /^MIT License/)
})
