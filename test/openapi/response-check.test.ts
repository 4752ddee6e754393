/**
 * The end-to-end tests' check of every response against the API description
 * (test/helpers/openapi-check.ts), on responses made up here: what the
 * document describes passes, and each way a response can stray from it is
 * caught, so a test that turns the check on cannot pass over a mismatch.
 */
import { readFileSync } from 'node:fs'
import t from 'tap'
import { openApiFile } from '../../scripts/api-document.js'
import type { CheckedResponse } from '../helpers/openapi-check.js'
import { OpenApiCheck } from '../helpers/openapi-check.js'

const check = new OpenApiCheck(JSON.parse(readFileSync(openApiFile, 'utf8')) as Record<string, unknown>)
const id = '0d5c8d0e-6a43-4a51-9d3e-3f3b1c0f6a11'
const agent = { id, name: 'Ada', createdAt: '2026-01-31T10:00:00.000Z', updatedAt: '2026-01-31T10:00:00.000Z' }
const json = { 'content-type': 'application/json; charset=utf-8', 'x-request-id': 'req-1' }

function response(status: number, body: unknown, headers: CheckedResponse['headers'] = json): CheckedResponse {
  return { status, headers, text: body === undefined ? '' : JSON.stringify(body) }
}

t.test('what the document describes passes', async (t) => {
  t.same(check.check('GET', `/v1/agents/${id}`, response(200, { success: true, data: agent })), [])
  t.same(
    check.check('GET', '/v1/agents?limit=1', response(200, { success: true, data: [agent], pagination: { limit: 1, nextCursor: 'x', hasMore: true } })),
    [],
  )
  t.same(check.check('DELETE', `/v1/agents/${id}`, response(204, undefined, { 'x-request-id': 'req-1' })), [])
  const limited = { ...json, 'retry-after': '1', ratelimit: '"tenant";r=0;t=1', 'ratelimit-policy': '"tenant";q=200;w=2' }
  t.same(check.check('GET', '/v1/agents', response(429, { success: false, message: 'Rate limit exceeded' }, limited)), [])
  t.same(check.check('PUT', `/v1/agents/${id}`, response(405, { success: false, message: 'Method not allowed' }, { ...json, allow: 'GET' })), [])
  t.same(check.check('GET', '/v1/nothing', response(404, { success: false, message: 'Not found' })), [])
  t.same(check.check('HEAD', `/v1/agents/${id}`, { status: 200, headers: json, text: '' }), [], 'HEAD: the GET without a body')
  t.same(check.check('GET', '/openapi.json', response(200, 'not checked')), [], 'paths outside /v1 are not described')
})

t.test('each way a response strays is caught', async (t) => {
  const cases: Array<[string, string, string, CheckedResponse, RegExp]> = [
    [
      'a field the schema does not have',
      'GET',
      `/v1/agents/${id}`,
      response(200, { success: true, data: { ...agent, extra: 1 } }),
      /must NOT have additional properties/,
    ],
    [
      'a wrong format',
      'GET',
      `/v1/agents/${id}`,
      response(200, { success: true, data: { ...agent, createdAt: 'yesterday' } }),
      /must match format "date-time"/,
    ],
    ['a missing field', 'GET', `/v1/agents/${id}`, response(200, { success: true, data: { id } }), /must have required property 'name'/],
    ['an undeclared status', 'GET', `/v1/agents/${id}`, response(418, { success: false, message: 'teapot' }), /status 418 is not declared/],
    ['no x-request-id', 'GET', `/v1/agents/${id}`, response(200, { success: true, data: agent }, { 'content-type': 'application/json' }), /no x-request-id/],
    ['a 429 without Retry-After', 'GET', '/v1/agents', response(429, { success: false, message: 'Rate limit exceeded' }), /no Retry-After header/],
    ['a 503 without Retry-After', 'GET', '/v1/agents', response(503, { success: false, message: 'Service unavailable' }), /no Retry-After header/],
    [
      'a Retry-After that is not seconds',
      'GET',
      '/v1/agents',
      response(429, { success: false, message: 'x' }, { ...json, 'retry-after': 'soon' }),
      /Retry-After: .*integer/,
    ],
    ['a body on a 204', 'DELETE', `/v1/agents/${id}`, response(204, { success: true }), /a body where none is declared/],
    ['an error outside the envelope', 'GET', `/v1/agents/${id}`, response(404, { error: 'not found' }), /must have required property 'success'/],
    ['a 405 without Allow', 'PUT', `/v1/agents/${id}`, response(405, { success: false, message: 'Method not allowed' }), /a 405 without Allow/],
    [
      'a method the path does not take, answered 200',
      'PUT',
      `/v1/agents/${id}`,
      response(200, { success: true }),
      /a method the path does not take answered 200/,
    ],
    ['not JSON', 'GET', `/v1/agents/${id}`, { status: 200, headers: json, text: '<html>' }, /not JSON/],
    [
      'another media type',
      'GET',
      `/v1/agents/${id}`,
      response(200, { success: true, data: agent }, { 'x-request-id': 'r', 'content-type': 'text/plain' }),
      /content-type text\/plain/,
    ],
  ]
  for (const [name, method, path, given, problem] of cases) {
    const problems = check.check(method, path, given)
    t.ok(
      problems.some((found) => problem.test(found)),
      `${name}: ${problems.join('; ')}`,
    )
  }
})
