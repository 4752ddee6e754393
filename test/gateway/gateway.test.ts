/**
 * The gateway over HTTPS, with real Postgres and Redis and the echo upstream
 * as its backend: the spec's error table, the scope matrix, tenant stripping
 * and signing, refusals before forwarding, upstream failures, last use,
 * operations endpoints and logs, against a replica in the test's process;
 * and a clean SIGTERM, against a replica as a process.
 */
import t from 'tap'
import type { Test } from 'tap'
import { request as httpRequest } from 'node:http'
import { errorCatalog } from '@scoped/shared/errors'
import { generateKey, KEY_PREFIX } from '@scoped/shared/keys'
import { tenantHeaders } from '@scoped/shared/tenant-signature'
import { clientAddressHeaders } from '@scoped/shared/signed-client-address'
import type { Echo } from '../helpers/echo-upstream.js'
import { rawHttpsRequest, rawStatus } from '../helpers/https.js'
import { runCtl } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait-for.js'
import { gatewayFixture } from './fixture.js'

const SCOPE_MESSAGES = ['This API key does not have access to this resource', 'This key cannot access this resource']

const fixture = await gatewayFixture(t)
const { tenants } = fixture
const agencyKey = await fixture.createKey('agency', 'agency key')
const subKey = await fixture.createKey('sub-account', 'sub key')
const replica = await fixture.startReplica()
const { client } = replica
const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` })
/** Every plaintext key this file sends, for the log check (which looks at every line logged so far). */
const presentedKeys = new Set([agencyKey.key, subKey.key])

/** Log lines (JSON, one per line), parsed. */
function logLines(output: string): Array<Record<string, unknown>> {
  return output
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>)
}

/** The request lines of the replica's log, once one carries each of `requestIds` (a line is written once its response has gone out). */
function requestLines(requestIds: string[]): Promise<Array<Record<string, unknown>>> {
  return waitFor(
    () => {
      const requests = logLines(replica.output()).filter((line) => line['msg'] === 'request')
      return requestIds.every((id) => requests.some((line) => line['reqId'] === id)) && requests
    },
    `the log lines of ${requestIds.join(', ')}`,
  )
}

/** A request over plain HTTP, to the listener that refuses everything. */
function plainRequest(path: string, headers: Record<string, string>, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: '127.0.0.1', port: replica.ports.http, path, method: 'POST', headers }, (res) => {
      let text = ''
      res.on('data', (chunk: Buffer) => (text += chunk.toString()))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }))
    })
    request.on('error', reject)
    request.end(body)
  })
}

function expectEnvelope(
  t: Test,
  response: { status: number; json: unknown; headers: Record<string, unknown> },
  status: number,
  message: string | string[],
): void {
  t.equal(response.status, status, 'status')
  t.match(response.headers['content-type'], /^application\/json/, 'JSON')
  const messages = Array.isArray(message) ? message : [message]
  t.same(Object.keys(response.json as object).sort(), ['message', 'success'], 'the envelope and nothing else')
  t.equal((response.json as { success: boolean }).success, false)
  t.ok(messages.includes((response.json as { message: string }).message), `message is one of ${messages.join(' | ')}`)
  if (status === 401) t.equal(response.headers['www-authenticate'], 'Bearer', 'a 401 names the Bearer scheme')
  t.match(response.headers['strict-transport-security'], /max-age=\d+/, 'HSTS')
}

t.test('the spec error table (§7), through HTTPS', async (t) => {
  const revoked = await fixture.createKey('sub-account', 'to revoke')
  const deleted = await fixture.createKey('sub-account', 'to delete')
  presentedKeys.add(revoked.key).add(deleted.key)
  t.equal((await runCtl(['key', 'revoke', revoked.id], fixture.ctlEnv)).status, 0)
  t.equal((await runCtl(['key', 'delete', deleted.id], fixture.ctlEnv)).status, 0)
  const unknown = generateKey()
  const rows: Array<[string, Record<string, string> | string[], number, string | string[]]> = [
    ['no key', {}, 401, errorCatalog.missingKey.message],
    ['malformed key', { 'x-api-key': 'sak_live_nope' }, 401, errorCatalog.missingKey.message],
    ['bad checksum', { 'x-api-key': subKey.key.slice(0, -1) + (subKey.key.endsWith('A') ? 'B' : 'A') }, 401, errorCatalog.missingKey.message],
    ['unknown (well-formed) key', { 'x-api-key': unknown }, 401, errorCatalog.missingKey.message],
    ['both headers', { ...bearer(subKey.key), 'x-api-key': subKey.key }, 401, errorCatalog.missingKey.message],
    ['repeated x-api-key', ['x-api-key', subKey.key, 'x-api-key', subKey.key], 401, errorCatalog.missingKey.message],
    ['repeated Authorization', ['authorization', `Bearer ${subKey.key}`, 'authorization', `Bearer ${subKey.key}`], 401, errorCatalog.missingKey.message],
    ['empty x-api-key', { 'x-api-key': '' }, 401, errorCatalog.missingKey.message],
    ['another scheme', { authorization: `Basic ${subKey.key}` }, 401, errorCatalog.missingKey.message],
    ['revoked key', bearer(revoked.key), 401, errorCatalog.revokedKey.message],
    ['deleted key', { 'x-api-key': deleted.key }, 401, errorCatalog.revokedKey.message],
    ['agency key on a sub-account endpoint', bearer(agencyKey.key), 403, SCOPE_MESSAGES],
  ]
  for (const [name, headers, status, message] of rows) {
    await t.test(name, async (t) => {
      const marker = `/v1/agents?row=${encodeURIComponent(name)}`
      expectEnvelope(t, await client.request(marker, { headers }), status, message)
      t.notOk(fixture.echo.output().includes(`row=${encodeURIComponent(name)}`), 'not forwarded')
    })
  }
})

const paths = ['/v1/agency', '/v1/agency/sub-accounts', '/v1/agency/sub-accounts/x', '/v1/agents', '/v1/agents/1', '/v1/contacts', '/v1/calls/2']

t.test('scope matrix: each key reaches its own prefixes (200, signed for its tenant) and nothing else (403)', async (t) => {
  for (const [name, created, scope] of [
    ['AGENCY', agencyKey, 'AGENCY'],
    ['SUB-ACCOUNT', subKey, 'SUB-ACCOUNT'],
  ] as const) {
    for (const path of paths) {
      const allowed = path.startsWith('/v1/agency') === (scope === 'AGENCY')
      for (const style of ['bearer', 'x-api-key'] as const) {
        const headers = style === 'bearer' ? bearer(created.key) : { 'x-api-key': created.key }
        const response = await client.request(path, { headers })
        if (!allowed) {
          expectEnvelope(t, response, 403, SCOPE_MESSAGES)
          continue
        }
        t.equal(response.status, 200, `${name} key, ${style}, ${path}`)
        const echo = response.json as Echo
        t.equal(echo.url, path)
        t.same(echo.tenant, {
          scope,
          agencyId: tenants.agencyId,
          subAccountId: scope === 'AGENCY' ? null : tenants.subAccountId,
          keyId: created.id,
          permissions: '*',
        })
      }
    }
  }
})

t.test('tenant stripping: query, JSON body and x-tenant-* headers; the key is never forwarded', async (t) => {
  const response = await client.request(`/v1/contacts?agency_id=${tenants.agencyId}&limit=5&SUB_ACCOUNT_ID=x&q=a%20b+c&agency%5Fid=y`, {
    method: 'POST',
    headers: {
      ...bearer(subKey.key),
      'content-type': 'application/json',
      'x-tenant-scope': 'AGENCY',
      'x-tenant-agency-id': tenants.agencyId,
      'x-tenant-sub-account-id': tenants.otherSubAccountId,
      'x-tenant-signature': 'f'.repeat(64),
      'x-tenant-made-up': 'x',
      cookie: 'session=abc',
    },
    body: JSON.stringify({ name: 'Ann', agency_id: tenants.agencyId, Sub_Account_Id: tenants.otherSubAccountId, nested: { agency_id: 'kept' } }),
  })
  t.equal(response.status, 200)
  const echo = response.json as Echo
  t.equal(echo.url, '/v1/contacts?limit=5&q=a%20b+c', 'tenant parameters gone, the rest byte for byte')
  t.same(JSON.parse(echo.body), { name: 'Ann', nested: { agency_id: 'kept' } })
  t.same(
    echo.tenant,
    { scope: 'SUB-ACCOUNT', agencyId: tenants.agencyId, subAccountId: tenants.subAccountId, keyId: subKey.id, permissions: '*' },
    'the key decides the tenant',
  )
  t.same(
    Object.keys(echo.headers)
      .filter((name) => name.startsWith('x-tenant-'))
      .sort(),
    [...Object.values(tenantHeaders), ...Object.values(clientAddressHeaders)].sort(),
    'only the gateway-set tenant headers (and its signed client address)',
  )
  t.notOk(echo.headers['x-tenant-made-up'])
  t.notOk(echo.headers.authorization, 'no authorization')
  t.notOk(echo.headers['x-api-key'], 'no x-api-key')
  t.notOk(echo.headers.cookie, 'no cookies to an API backend')
  t.notOk(JSON.stringify(echo).includes(subKey.key), 'the key appears nowhere upstream')

  const viaHeader = (await client.request('/v1/agents', { headers: { 'x-api-key': subKey.key } })).json as Echo
  t.notOk(viaHeader.headers['x-api-key'])
  t.notOk(JSON.stringify(viaHeader).includes(subKey.key))
})

t.test('bodies: JSON re-serialized, others streamed untouched, bad JSON 400', async (t) => {
  const form = 'agency_id=1&name=x'
  const streamed = await client.request('/v1/contacts', {
    method: 'POST',
    headers: { ...bearer(subKey.key), 'content-type': 'application/x-www-form-urlencoded' },
    body: form,
  })
  t.equal((streamed.json as Echo).body, form, 'a non-JSON body is not touched')
  const binary = Buffer.from([0, 1, 2, 255, 254])
  const octets = await client.request('/v1/contacts', {
    method: 'PUT',
    headers: { ...bearer(subKey.key), 'content-type': 'application/octet-stream' },
    body: binary,
  })
  t.equal((octets.json as Echo).headers['content-length'], '5')
  const falsy = await client.request('/v1/contacts', { method: 'POST', headers: { ...bearer(subKey.key), 'content-type': 'application/json' }, body: 'null' })
  t.equal((falsy.json as Echo).body, 'null', 'a falsy JSON body still arrives')
  expectEnvelope(
    t,
    await client.request('/v1/contacts', { method: 'POST', headers: { ...bearer(subKey.key), 'content-type': 'application/json' }, body: '{"name":' }),
    400,
    'Request body is not valid JSON',
  )
})

t.test('bodies too large: 413', async (t) => {
  const big = JSON.stringify({ name: 'x'.repeat(1024 * 1024 + 10) })
  expectEnvelope(
    t,
    await client.request('/v1/contacts', { method: 'POST', headers: { ...bearer(subKey.key), 'content-type': 'application/json' }, body: big }),
    413,
    errorCatalog.payloadTooLarge.message,
  )
  expectEnvelope(
    t,
    await client.request('/v1/contacts', {
      method: 'POST',
      headers: { ...bearer(subKey.key), 'content-type': 'application/octet-stream' },
      body: Buffer.alloc(1024 * 1024 + 10),
    }),
    413,
    errorCatalog.payloadTooLarge.message,
  )
})

t.test('order: path (400) before key (401) before route (404) before scope (403)', async (t) => {
  expectEnvelope(t, await client.request('/v1/agents/../agency'), 400, errorCatalog.badPath.message)
  expectEnvelope(t, await client.request('/v1/agents/..%2fagency', { headers: bearer(subKey.key) }), 400, errorCatalog.badPath.message)
  expectEnvelope(t, await client.request('/v1/nothing-here'), 401, errorCatalog.missingKey.message)
  expectEnvelope(t, await client.request('/not-v1'), 401, errorCatalog.missingKey.message)
  expectEnvelope(t, await client.request('/v1/nothing-here', { headers: bearer(subKey.key) }), 404, errorCatalog.notFound.message)
  expectEnvelope(t, await client.request('/v1/agencyx', { headers: bearer(agencyKey.key) }), 404, errorCatalog.notFound.message)
  expectEnvelope(t, await client.request('/V1/AGENTS', { headers: bearer(subKey.key) }), 404, errorCatalog.notFound.message)
  expectEnvelope(t, await client.request('/v1/agency', { headers: bearer(subKey.key) }), 403, SCOPE_MESSAGES)
  const trace = await client.request('/v1/agents', { method: 'TRACE' as 'GET', headers: bearer(subKey.key) })
  expectEnvelope(t, trace, 405, errorCatalog.methodNotAllowed.message)
  t.equal(trace.headers['allow'], 'DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT', 'a 405 names the methods the gateway forwards')
})

t.test('hostile paths are refused with 400 and never forwarded', async (t) => {
  const hostile = [
    '/v1/agents/../agency',
    '/v1/agents/%2e%2e/agency',
    '/v1/agents/%2E%2E/agency',
    '/v1/agents/..%2fagency',
    '//v1/agency',
    '/v1//agency',
    '/v1/agents/./x',
    '/v1/agents;/x',
    '/v1/agents/..;/agency',
    '/v1/agents%2fx',
    '/v1/agents/%5cx',
    '/v1/agents\\..\\agency',
    '/v1/agents/%00',
    '/v1/agents/%252e%252e',
    '/v1/agents/%zz',
    '/v1/agents/%C0%AF',
    'http://evil.example/v1/agents',
  ]
  for (const path of hostile) {
    const response = await client.request(path, { headers: bearer(subKey.key) })
    t.equal(response.status, 400, path)
    t.equal((response.json as { message: string }).message, errorCatalog.badPath.message, path)
  }
  // Bytes no HTTP client sends: Node's parser refuses them before Fastify, still in the envelope.
  for (const line of ['GET /v1/agents/caf\u00e9 HTTP/1.1', 'GET /v1/agents/\u0001 HTTP/1.1', 'GET /v1/agents/a\u0000b HTTP/1.1']) {
    const raw = await rawHttpsRequest(replica.ports.api, fixture.ca, `${line}\r\nHost: localhost\r\nx-api-key: ${subKey.key}\r\n\r\n`)
    t.equal(rawStatus(raw), 400, JSON.stringify(line))
    t.match(raw, /"success":false/)
  }
  const forwarded = fixture.echo.output()
  for (const marker of ['agency', '%2e', '%00', 'evil', '\\', ';', 'caf'])
    t.notOk(
      forwarded.split('\n').some((line) => line.startsWith('echo: GET /v1/agents') && line.includes(marker) && !line.includes('row=')),
      `nothing with ${marker} was forwarded`,
    )
  // One log line each, whether Fastify's router or the gate refused it, or it went through.
  await client.request('/v1/agents/%zz', { headers: { 'x-request-id': 'one-line-router' } })
  await client.request('/v1/agents/..', { headers: { 'x-request-id': 'one-line-gate' } })
  await client.request('/v1/agents', { headers: { ...bearer(subKey.key), 'x-request-id': 'one-line-forwarded' } })
  const accepted = await client.request('/v1/%61gents/x', { headers: { ...bearer(subKey.key), 'x-request-id': 'one-line-after' } })
  t.equal((accepted.json as Echo).url, '/v1/agents/x', 'an encoded letter is forwarded decoded, as authorized')
  // The checksum is checked only for keys not in memory: a known key (in memory now) with one character of
  // its checksum changed is still refused as malformed, never looked up; a well-formed unknown key is.
  const badChecksum = subKey.key.slice(0, -1) + (subKey.key.endsWith('A') ? 'B' : 'A')
  await client.request('/v1/agents', { headers: { 'x-api-key': badChecksum, 'x-request-id': 'one-line-bad-checksum' } })
  await client.request('/v1/agents', { headers: { 'x-api-key': generateKey(), 'x-request-id': 'one-line-unknown' } })
  const requests = await requestLines(['one-line-router', 'one-line-gate', 'one-line-forwarded', 'one-line-after', 'one-line-bad-checksum', 'one-line-unknown'])
  for (const [id, outcome, status] of [
    ['one-line-router', 'bad-path', 400],
    ['one-line-gate', 'bad-path', 400],
    ['one-line-forwarded', 'forwarded', 200],
    ['one-line-bad-checksum', 'malformed', 401],
    ['one-line-unknown', 'unknown', 401],
  ] as const) {
    const mine = requests.filter((line) => line['reqId'] === id)
    t.equal(mine.length, 1, `${id}: exactly one line`)
    t.match(mine[0], { outcome, status })
  }
})

t.test('console routes (auth: session): no key, cookies forwarded, no tenant headers, no credentials', async (t) => {
  const response = await client.request('/console/keys?sub_account_id=x', {
    headers: {
      cookie: 'session=abc',
      'x-tenant-scope': 'AGENCY',
      'x-tenant-signature': 'f'.repeat(64),
      authorization: 'Bearer whatever',
      'x-forwarded-for': '203.0.113.7',
      'x-forwarded-host': 'evil.example',
      forwarded: 'for=203.0.113.7',
    },
  })
  t.equal(response.status, 200)
  const echo = response.json as Echo
  t.equal(echo.headers['x-forwarded-for'], '127.0.0.1', 'the client address is the one the gateway saw, not the one claimed')
  t.match(echo.headers['x-forwarded-host'], /^(localhost|127\.0\.0\.1):\d+$/, 'the host the caller addressed')
  t.equal(echo.headers['x-forwarded-proto'], 'https')
  t.notOk(echo.headers.forwarded, 'a caller-sent Forwarded header is dropped')
  t.equal(echo.url, '/console/keys?sub_account_id=x', 'the console query is the console backend’s business')
  t.equal(echo.headers.cookie, 'session=abc')
  t.equal(echo.tenant, null)
  t.same(
    Object.keys(echo.headers)
      .filter((name) => name.startsWith('x-tenant-'))
      .sort(),
    Object.values(clientAddressHeaders).sort(),
    'no tenant headers: only the client address the gateway signed (none of the caller’s)',
  )
  t.notOk(echo.headers.authorization)
  expectEnvelope(t, await client.request('/consolex'), 401, errorCatalog.missingKey.message)
})

t.test('x-request-id: a well-formed one is kept end to end; anything else (or anything shaped like a key) is replaced', async (t) => {
  const kept = await client.request('/v1/agents', { headers: { ...bearer(subKey.key), 'x-request-id': 'abc.DEF-123_x' } })
  t.equal(kept.headers['x-request-id'], 'abc.DEF-123_x')
  t.equal((kept.json as Echo).headers['x-request-id'], 'abc.DEF-123_x')
  t.match(kept.headers['strict-transport-security'], /^max-age=\d+; includeSubDomains$/, 'a forwarded answer carries HSTS too')
  const made = /^[0-9a-f-]{36}-[0-9a-z]+$/
  for (const bad of ['has space', 'x'.repeat(129), 'semi;colon', '', `sak_live_${'a'.repeat(49)}`]) {
    const replaced = await client.request('/v1/agents', { headers: { ...bearer(subKey.key), 'x-request-id': bad } })
    const id = replaced.headers['x-request-id'] as string
    t.match(id, made, `${JSON.stringify(bad.slice(0, 20))} replaced`)
    t.equal((replaced.json as Echo).headers['x-request-id'], id, 'the upstream sees the same id')
  }
  const refused = await client.request('/v1/agents')
  t.match(refused.headers['x-request-id'], made, 'refusals carry one too')
  t.not(refused.headers['x-request-id'], kept.headers['x-request-id'])
})

t.test('upstream answers pass through; down is 502, a dropped connection 502, too slow 504', async (t) => {
  const created = await client.request('/v1/agents', {
    method: 'POST',
    headers: { ...bearer(subKey.key), 'x-echo-status': '201', 'content-type': 'application/json' },
    body: '{}',
  })
  t.equal(created.status, 201)
  t.equal(created.headers['x-upstream'], 'echo')
  const failing = await client.request('/v1/agents', { headers: { ...bearer(subKey.key), 'x-echo-status': '500' } })
  t.equal(failing.status, 500, 'an upstream error status is the upstream’s answer')
  expectEnvelope(t, await client.request('/v1/agents/down', { headers: bearer(subKey.key) }), 502, errorCatalog.badGateway.message)
  expectEnvelope(t, await client.request('/v1/agents', { headers: { ...bearer(subKey.key), 'x-echo-reset': '1' } }), 502, errorCatalog.badGateway.message)
  expectEnvelope(
    t,
    await client.request('/v1/agents', { headers: { ...bearer(subKey.key), 'x-echo-delay-ms': '3000' } }),
    504,
    errorCatalog.gatewayTimeout.message,
  )
})

t.test('plain HTTP is refused before the API: envelope, never forwarded, key never looked at', async (t) => {
  const response = await plainRequest('/v1/agents?plain-marker=1', { 'x-api-key': subKey.key, 'content-type': 'application/json' }, '{"name":"x"}')
  t.equal(response.status, errorCatalog.httpsRequired.status)
  t.same(JSON.parse(response.body), { success: false, message: errorCatalog.httpsRequired.message })
  t.notOk(fixture.echo.output().includes('plain-marker'), 'not forwarded')
})

t.test('last use is recorded within 5 seconds and shows in ctl key list', async (t) => {
  const fresh = await fixture.createKey('sub-account', 'last use')
  presentedKeys.add(fresh.key)
  t.equal((await client.request('/v1/agents', { headers: bearer(fresh.key) })).status, 200)
  const lastUsedAt = await waitFor(
    async () => {
      const { rows } = await fixture.db.pool.query<{ last_used_at: Date | null }>('SELECT last_used_at FROM api_keys WHERE id = $1', [fresh.id])
      return rows[0]?.last_used_at?.toISOString()
    },
    'last use to be written (within 5 seconds)',
    5_000,
    100,
  )
  t.ok(lastUsedAt, 'written within 5 seconds')
  const listed = await runCtl(['key', 'list', '--sub-account', tenants.subAccountId], fixture.ctlEnv)
  const entry = (listed.json as Array<{ id: string; lastUsedAt: string | null }>).find((key) => key.id === fresh.id)
  t.equal(entry?.lastUsedAt, lastUsedAt, 'ctl key list shows it')
})

t.test('operations listener: healthz, readyz, metrics', async (t) => {
  const get = async (path: string): Promise<{ status: number; text: string }> => {
    const response = await fetch(`http://127.0.0.1:${replica.ports.admin}${path}`)
    return { status: response.status, text: await response.text() }
  }
  // What the metrics below count, whatever ran before: a fresh key twice (Redis miss, then a memory hit), a
  // scope mismatch, no key, plain HTTP.
  const fresh = await fixture.createKey('sub-account', 'metrics')
  presentedKeys.add(fresh.key)
  t.equal((await client.request('/v1/agents', { headers: bearer(fresh.key) })).status, 200)
  t.equal((await client.request('/v1/agents', { headers: bearer(fresh.key) })).status, 200)
  t.equal((await client.request('/v1/agents', { headers: bearer(agencyKey.key) })).status, 403)
  t.equal((await client.request('/v1/agents')).status, 401)
  t.equal((await plainRequest('/v1/agents', {}, '')).status, errorCatalog.httpsRequired.status)
  t.equal((await get('/healthz')).status, 200)
  const ready = await get('/readyz')
  t.equal(ready.status, 200)
  t.same(JSON.parse(ready.text).checks, { postgres: true, keyLookup: true, invalidationLog: true, issuedKeys: true, routes: true, accepting: true })
  const metrics = (await get('/metrics')).text
  t.match(metrics, /gateway_requests_total\{outcome="forwarded",scope="SUB-ACCOUNT",route="\/v1\/agents"\} \d+/)
  t.match(metrics, /gateway_requests_total\{outcome="scope-mismatch",scope="AGENCY",route="\/v1\/agents"\} \d+/)
  t.match(metrics, /gateway_requests_total\{outcome="missing",scope="none",route="none"\} \d+/)
  t.match(metrics, /gateway_requests_total\{outcome="https-required",scope="none",route="none"\} \d+/)
  t.match(metrics, /gateway_key_cache_lookups_total\{layer="memory",result="hit"\} [1-9]\d*/)
  t.match(metrics, /gateway_key_cache_lookups_total\{layer="redis",result="miss"\} [1-9]\d*/)
  t.match(metrics, /gateway_upstream_duration_seconds_bucket\{le="0.1",route="\/v1\/agents"\} \d+/)
  t.match(metrics, /gateway_upstream_duration_seconds_count\{route="\/v1\/agents"\} [1-9]\d*/)
  t.match(metrics, /# TYPE gateway_key_invalidations_total counter/)
  t.match(metrics, /gateway_invalidation_log_polls_total\{result="ok"\} [1-9]\d*/)
})

t.test('SIGTERM (a replica as a process): in-flight requests finish, last use is flushed, exit 0; its output holds no key', async (t) => {
  const terminated = await fixture.startReplicaProcess({}, { t })
  const lastKey = await fixture.createKey('agency', 'shutdown')
  presentedKeys.add(lastKey.key)
  const inFlight = terminated.client.request('/v1/agency?shutdown=in-flight', { headers: { ...bearer(lastKey.key), 'x-echo-delay-ms': '600' } })
  // SIGTERM only once the request has reached the backend (the echo prints each request line), not after a guessed delay.
  await waitFor(() => fixture.echo.output().includes('shutdown=in-flight'), 'the request to reach the backend')
  const exit = terminated.process.stop('SIGTERM')
  const response = await inFlight
  t.equal(response.status, 200, 'the in-flight request completed')
  t.equal(await exit, 0, 'exit status 0')
  const { rows } = await fixture.db.pool.query<{ last_used_at: Date | null }>('SELECT last_used_at FROM api_keys WHERE id = $1', [lastKey.id])
  t.ok(rows[0]?.last_used_at, 'last use flushed at shutdown')

  // Its last lines may come through the pipe just after the exit.
  const output = await waitFor(() => terminated.output().includes('"msg":"gateway stopped"') && terminated.output(), 'its last log line')
  t.notOk(output.includes(lastKey.key), 'no plaintext key in its output')
  t.notOk(output.includes(lastKey.key.slice(KEY_PREFIX.length, KEY_PREFIX.length + 20)), 'no part of the key’s secret either')
  t.notOk(output.includes(fixture.secret), 'no signing secret')
  const lines = logLines(output)
  t.match(
    lines.find((line) => line['msg'] === 'request' && line['keyId'] === lastKey.id),
    { outcome: 'forwarded', scope: 'AGENCY', agencyId: tenants.agencyId, status: 200 },
    'the in-flight request was logged',
  )
  t.ok(lines.some((line) => line['msg'] === 'gateway stopped'))
})

t.test('logs: a line per request with its tenant; no key, no part of one, no secret, no signature, no cookie', async (t) => {
  // Requests of its own, so that it has something to look at alone; it looks at every line logged so far, and
  // so at the requests of the tests before it too.
  const own = await fixture.createKey('sub-account', 'log check')
  const unknown = generateKey()
  presentedKeys.add(own.key).add(unknown)
  const sensitive = { cookie: 'session=abc', 'x-tenant-signature': 'f'.repeat(64) }
  t.equal((await client.request('/v1/agents?log-check=1', { headers: { ...bearer(own.key), ...sensitive } })).status, 200)
  t.equal((await client.request('/console/keys', { headers: sensitive })).status, 200)
  t.equal((await client.request('/v1/agents', { headers: { 'x-api-key': unknown } })).status, 401)
  t.equal((await client.request('/v1/agency', { headers: bearer(own.key) })).status, 403)
  t.equal((await client.request(`/v1/agents/${own.key}`, { headers: { ...bearer(own.key), 'x-request-id': 'log-check-last' } })).status, 200)
  const requests = await requestLines(['log-check-last'])

  const output = replica.output()
  for (const key of presentedKeys) {
    t.notOk(output.includes(key), 'no plaintext key in the logs')
    t.notOk(output.includes(key.slice(KEY_PREFIX.length, KEY_PREFIX.length + 20)), 'no part of a key’s secret either')
  }
  t.notOk(output.includes(fixture.secret), 'no signing secret')
  t.notOk(/"x-tenant-signature":"[0-9a-f]{64}"/.test(output), 'no signature')
  t.notOk(output.includes('session=abc'), 'no cookie')
  const forwarded = requests.find((line) => line['outcome'] === 'forwarded' && line['keyId'] === own.id)
  t.match(forwarded, {
    reqId: String,
    method: 'GET',
    path: '/v1/agents',
    route: '/v1/agents',
    keyId: own.id,
    scope: 'SUB-ACCOUNT',
    agencyId: tenants.agencyId,
    subAccountId: tenants.subAccountId,
    status: 200,
    ms: Number,
  })
  t.same(
    requests.filter((line) => line['keyId'] === own.id).map((line) => line['outcome']),
    ['forwarded', 'scope-mismatch', 'forwarded'],
    'one line for each of its requests',
  )
})
