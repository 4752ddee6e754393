/**
 * The backends' tenant verifier: a request passes only when the gateway
 * signed it for this backend's audience, with this body, once, within the
 * window; every refusal is 401 in the envelope and one warn line naming the
 * reason and no header value. With Redis, "once" holds across every replica
 * of a backend, and a nonce Redis cannot check is refused (503).
 */
import t from 'tap'
import { request as httpRequest } from 'node:http'
import type { AddressInfo } from 'node:net'
import Fastify from 'fastify'
import type { FastifyInstance, FastifyServerOptions } from 'fastify'
import pino from 'pino'
import { errorEnvelopePlugin } from '@scoped/shared/error-envelope-plugin'
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from '@scoped/shared/errors'
import { readAudienceSecrets } from '@scoped/shared/secrets'
import type { SigningSecret, Tenant } from '@scoped/shared/tenant-signature'
import {
  AGENCY_SERVICE_AUDIENCE,
  CONTENT_DIGEST_HEADER,
  contentDigest,
  EMPTY_CONTENT_DIGEST,
  RESOURCE_SERVICE_AUDIENCE,
  signTenantHeaders,
  tenantHeaders,
} from '@scoped/shared/tenant-signature'
import type { TenantVerifierRefusal } from '@scoped/shared/tenant-verifier'
import type { NonceRedis } from '@scoped/shared/nonce-store'
import { NonceMemory, nonceKey } from '@scoped/shared/nonce-store'
import { createRedis } from '@scoped/shared/redis'
import { requireTenantScope, tenantSubAccountId, tenantVerifier } from '@scoped/shared/tenant-verifier'
import { startRedisServer } from '../helpers/redis-server.js'
import { createTestRedis } from '../helpers/redis.js'
import { newNonce } from '../helpers/signed-request.js'
import type { Teardown } from '../helpers/teardown.js'
import { waitFor } from '../helpers/wait-for.js'

const master = 'm'.repeat(40)
const masterPrevious = 'n'.repeat(40)
/** This backend (resource-service): its current and previous secrets, derived as in production. */
const [secret, previous] = readAudienceSecrets(
  { TENANT_SIGNING_SECRET: master, TENANT_SIGNING_SECRET_PREVIOUS: masterPrevious },
  RESOURCE_SERVICE_AUDIENCE,
) as [Buffer, Buffer]
/** The other backend's secret, from the same master. */
const otherAudienceSecret = readAudienceSecrets({ TENANT_SIGNING_SECRET: master }, AGENCY_SERVICE_AUDIENCE)[0]!
const audience = RESOURCE_SERVICE_AUDIENCE

const subAccount: Tenant = { scope: 'SUB-ACCOUNT', agencyId: 'agency-1', subAccountId: 'sub-1', keyId: 'key-1' }
const agency: Tenant = { scope: 'AGENCY', agencyId: 'agency-1', subAccountId: null, keyId: 'key-2' }
const refused = { success: false, message: 'Request was not signed by the gateway' }
const T0 = 1_700_000_000

interface LogLine {
  level: number
  msg: string
  reason?: string
}

interface Built {
  app: FastifyInstance
  /** Log lines since the last `take()`. */
  take: () => string[]
  /** How many times the write route's handler ran, and with what. */
  writes: unknown[]
}

async function build(clock: { now: number }, windowSeconds?: number, redis?: NonceRedis): Promise<Built> {
  let lines: string[] = []
  const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) })
  const options: FastifyServerOptions = { loggerInstance: logger }
  const app = Fastify(options)
  await app.register(errorEnvelopePlugin)
  await app.register(tenantVerifier, {
    audience,
    secrets: [secret, previous],
    now: () => clock.now,
    windowSeconds,
    unsignedRoutes: ['/healthz', '/console'],
    ...(redis === undefined ? {} : { redis }),
  })
  const writes: unknown[] = []
  app.get('/healthz', async () => ({ ok: true }))
  app.get('/healthz/deep', async () => ({ ok: true }))
  app.get('/console/page', async () => ({ page: true }))
  app.get('/console/leak', async (request) => ({ tenant: request.tenant }))
  app.get('/consolex', async () => ({ unsigned: 'must not be' }))
  app.get('/v1/tenant', async (request) => ({ tenant: request.tenant }))
  app.post('/v1/things', async (request, reply) => {
    writes.push(request.body)
    return reply.code(201).send({ tenant: request.tenant, body: request.body ?? null })
  })
  app.delete('/v1/things', async (request) => {
    writes.push('deleted')
    return { tenant: request.tenant }
  })
  await app.register(
    async (scoped) => {
      scoped.addHook('onRequest', requireTenantScope('SUB-ACCOUNT'))
      scoped.get('/things', async (request) => ({ subAccountId: tenantSubAccountId(request) }))
    },
    { prefix: '/v1/sub' },
  )
  const take = (): string[] => {
    const taken = lines
    lines = []
    return taken
  }
  return { app, take, writes }
}

interface Sign {
  tenant?: Tenant
  key?: SigningSecret
  audience?: string
  /** Signing time; the clock's now when omitted. */
  at?: number
  nonce?: string
  /** The digest signed; that of `body` when omitted. */
  digest?: string
  body?: string
}

/** Headers as the gateway makes them for `method url` with `body`, each part replaceable. */
function signed(method: string, url: string, now: number, options: Sign = {}): Record<string, string> {
  return signTenantHeaders(
    options.key ?? secret,
    {
      method,
      pathWithQuery: url,
      audience: options.audience ?? audience,
      contentDigest: options.digest ?? contentDigest(options.body),
      nonce: options.nonce ?? newNonce(),
    },
    options.tenant ?? subAccount,
    options.at ?? now,
  )
}

function without(headers: Record<string, string>, name: string): Record<string, string> {
  const copy = { ...headers }
  delete copy[name]
  return copy
}

interface Row {
  name: string
  method: 'GET' | 'POST' | 'DELETE'
  url: string
  headers: (now: number) => Record<string, string>
  body?: string
  /** Sent first, once, with the same headers (a capture replayed). */
  sendTwice?: boolean
  status: number
  reason?: TenantVerifierRefusal
}

const json = { 'content-type': 'application/json' }
const bodyA = JSON.stringify({ name: 'Ada' })
const bodyB = JSON.stringify({ name: 'Mallory' })

const rows: Row[] = [
  { name: 'valid GET', method: 'GET', url: '/v1/tenant', headers: (now) => signed('GET', '/v1/tenant', now), status: 200 },
  { name: 'valid GET with a query', method: 'GET', url: '/v1/tenant?limit=5', headers: (now) => signed('GET', '/v1/tenant?limit=5', now), status: 200 },
  {
    name: 'valid POST with a body',
    method: 'POST',
    url: '/v1/things',
    body: bodyA,
    headers: (now) => ({ ...signed('POST', '/v1/things', now, { body: bodyA }), ...json }),
    status: 201,
  },
  { name: 'valid DELETE without a body', method: 'DELETE', url: '/v1/things', headers: (now) => signed('DELETE', '/v1/things', now), status: 200 },
  { name: 'previous secret accepted', method: 'GET', url: '/v1/tenant', headers: (now) => signed('GET', '/v1/tenant', now, { key: previous }), status: 200 },
  {
    name: 'signed for the other audience (with its secret)',
    method: 'GET',
    url: '/v1/tenant',
    headers: (now) => signed('GET', '/v1/tenant', now, { key: otherAudienceSecret, audience: AGENCY_SERVICE_AUDIENCE }),
    status: 401,
    reason: 'wrong-audience',
  },
  {
    name: 'signed for the other audience, audience header rewritten to this one',
    method: 'GET',
    url: '/v1/tenant',
    headers: (now) => ({
      ...signed('GET', '/v1/tenant', now, { key: otherAudienceSecret, audience: AGENCY_SERVICE_AUDIENCE }),
      [tenantHeaders.audience]: audience,
    }),
    status: 401,
    reason: 'bad-signature',
  },
  {
    name: 'a secret of the other audience refused',
    method: 'GET',
    url: '/v1/tenant',
    headers: (now) => signed('GET', '/v1/tenant', now, { key: otherAudienceSecret }),
    status: 401,
    reason: 'bad-signature',
  },
  {
    name: 'the master secret itself refused',
    method: 'GET',
    url: '/v1/tenant',
    headers: (now) => signed('GET', '/v1/tenant', now, { key: master }),
    status: 401,
    reason: 'bad-signature',
  },
  {
    name: 're-bodied POST (same signed headers, other body)',
    method: 'POST',
    url: '/v1/things',
    body: bodyB,
    headers: (now) => ({ ...signed('POST', '/v1/things', now, { body: bodyA }), ...json }),
    status: 401,
    reason: 'body-mismatch',
  },
  {
    name: 're-bodied POST with the digest header rewritten to the new body',
    method: 'POST',
    url: '/v1/things',
    body: bodyB,
    headers: (now) => ({ ...signed('POST', '/v1/things', now, { body: bodyA }), [CONTENT_DIGEST_HEADER]: contentDigest(bodyB), ...json }),
    status: 401,
    reason: 'bad-signature',
  },
  {
    name: 'POST signed without a body, sent with one',
    method: 'POST',
    url: '/v1/things',
    body: bodyA,
    headers: (now) => ({ ...signed('POST', '/v1/things', now), ...json }),
    status: 401,
    reason: 'body-mismatch',
  },
  {
    name: 'GET carrying a non-empty digest',
    method: 'GET',
    url: '/v1/tenant',
    headers: (now) => signed('GET', '/v1/tenant', now, { digest: contentDigest('{}') }),
    status: 401,
    reason: 'body-mismatch',
  },
  {
    name: 'DELETE without a body carrying a non-empty digest',
    method: 'DELETE',
    url: '/v1/things',
    headers: (now) => signed('DELETE', '/v1/things', now, { digest: contentDigest(bodyA) }),
    status: 401,
    reason: 'body-mismatch',
  },
  {
    name: 'GET with a body Fastify never reads (digest unchecked, so refused)',
    method: 'GET',
    url: '/v1/tenant',
    body: bodyA,
    headers: (now) => ({ ...signed('GET', '/v1/tenant', now, { body: bodyA }), ...json }),
    status: 401,
    reason: 'body-mismatch',
  },
  {
    name: 'replayed nonce',
    method: 'GET',
    url: '/v1/tenant',
    headers: (now) => signed('GET', '/v1/tenant', now),
    sendTwice: true,
    status: 401,
    reason: 'replayed',
  },
  {
    name: 'replayed POST',
    method: 'POST',
    url: '/v1/things',
    body: bodyA,
    headers: (now) => ({ ...signed('POST', '/v1/things', now, { body: bodyA }), ...json }),
    sendTwice: true,
    status: 401,
    reason: 'replayed',
  },
  {
    name: 'stale (31 s old)',
    method: 'GET',
    url: '/v1/tenant',
    headers: (now) => signed('GET', '/v1/tenant', now, { at: now - 31 }),
    status: 401,
    reason: 'stale',
  },
  {
    name: 'from the future (31 s ahead)',
    method: 'GET',
    url: '/v1/tenant',
    headers: (now) => signed('GET', '/v1/tenant', now, { at: now + 31 }),
    status: 401,
    reason: 'stale',
  },
  {
    name: 'tampered tenant header (sub-account)',
    method: 'GET',
    url: '/v1/tenant',
    headers: (now) => ({ ...signed('GET', '/v1/tenant', now), [tenantHeaders.subAccountId]: 'sub-2' }),
    status: 401,
    reason: 'bad-signature',
  },
  {
    name: 'tampered tenant header (key id)',
    method: 'GET',
    url: '/v1/tenant',
    headers: (now) => ({ ...signed('GET', '/v1/tenant', now), [tenantHeaders.keyId]: 'key-9' }),
    status: 401,
    reason: 'bad-signature',
  },
  {
    name: 'tampered nonce',
    method: 'GET',
    url: '/v1/tenant',
    headers: (now) => ({ ...signed('GET', '/v1/tenant', now), [tenantHeaders.nonce]: newNonce() }),
    status: 401,
    reason: 'bad-signature',
  },
  {
    name: 'signed for another path',
    method: 'GET',
    url: '/v1/tenant?x=1',
    headers: (now) => signed('GET', '/v1/tenant', now),
    status: 401,
    reason: 'bad-signature',
  },
  {
    name: 'signed for another method',
    method: 'DELETE',
    url: '/v1/things',
    headers: (now) => signed('GET', '/v1/things', now),
    status: 401,
    reason: 'bad-signature',
  },
  {
    name: 'a malformed nonce',
    method: 'GET',
    url: '/v1/tenant',
    headers: (now) => signed('GET', '/v1/tenant', now, { nonce: 'short' }),
    status: 401,
    reason: 'malformed',
  },
  {
    name: 'a malformed digest',
    method: 'GET',
    url: '/v1/tenant',
    headers: (now) => signed('GET', '/v1/tenant', now, { digest: 'sha-512=:AAAA:' }),
    status: 401,
    reason: 'malformed',
  },
  {
    name: 'SUB-ACCOUNT scope without its sub-account header',
    method: 'GET',
    url: '/v1/tenant',
    headers: (now) => without(signed('GET', '/v1/tenant', now), tenantHeaders.subAccountId),
    status: 401,
    reason: 'malformed',
  },
  { name: 'no headers at all', method: 'GET', url: '/v1/tenant', headers: () => ({}), status: 401, reason: 'missing' },
  ...[
    tenantHeaders.signature,
    tenantHeaders.timestamp,
    tenantHeaders.scope,
    tenantHeaders.agencyId,
    tenantHeaders.keyId,
    tenantHeaders.audience,
    tenantHeaders.nonce,
    CONTENT_DIGEST_HEADER,
  ].map((header): Row => ({
    name: `missing ${header}`,
    method: 'GET',
    url: '/v1/tenant',
    headers: (now) => without(signed('GET', '/v1/tenant', now), header),
    status: 401,
    reason: 'missing',
  })),
]

t.test('each way a request can be signed or forged, with the refusal and its one log line', async (t) => {
  const clock = { now: T0 }
  const { app, take, writes } = await build(clock)
  t.teardown(() => app.close())
  for (const row of rows) {
    const headers = row.headers(clock.now)
    const send = () => app.inject({ method: row.method, url: row.url, headers, payload: row.body })
    if (row.sendTwice) t.equal((await send()).statusCode, row.method === 'POST' ? 201 : 200, `${row.name}: the first time is accepted`)
    take()
    const writesBefore = writes.length
    const response = await send()
    t.equal(response.statusCode, row.status, row.name)
    const lines = take()
    if (row.status !== 401) {
      t.same(lines, [], `${row.name}: nothing logged at warn`)
      continue
    }
    t.same(response.json(), refused, row.name)
    t.equal(writes.length, writesBefore, `${row.name}: the handler did not run`)
    const parsed = lines.map((line) => JSON.parse(line) as LogLine)
    t.match(parsed, [{ level: 40, msg: 'tenant signature refused', reason: row.reason }], `${row.name}: one warn line with the reason`)
    t.equal(parsed.length, 1, `${row.name}: exactly one line`)
    for (const [name, value] of Object.entries(headers)) {
      // Values too short or too common to tell apart from the log's own fields.
      if (name === 'content-type' || name === tenantHeaders.timestamp || value === audience || value === AGENCY_SERVICE_AUDIENCE || value === 'SUB-ACCOUNT')
        continue
      t.notMatch(lines.join(''), value, `${row.name}: the log has no ${name} value`)
    }
  }
  t.same(writes, [JSON.parse(bodyA), 'deleted', JSON.parse(bodyA)], 'only the accepted writes ran, with the signed body')
})

t.test('the signed body is what the route gets, and an empty body needs the empty digest', async (t) => {
  const clock = { now: T0 }
  const { app } = await build(clock)
  t.teardown(() => app.close())
  const created = await app.inject({
    method: 'POST',
    url: '/v1/things',
    payload: bodyA,
    headers: { ...signed('POST', '/v1/things', clock.now, { body: bodyA }), ...json },
  })
  t.equal(created.statusCode, 201)
  t.same(created.json(), { tenant: subAccount, body: { name: 'Ada' } })
  t.equal(EMPTY_CONTENT_DIGEST, contentDigest(''))
  const emptyPost = await app.inject({ method: 'POST', url: '/v1/things', headers: signed('POST', '/v1/things', clock.now, { digest: EMPTY_CONTENT_DIGEST }) })
  t.equal(emptyPost.statusCode, 201, 'a POST without a body, signed with the empty digest')
  t.same(emptyPost.json(), { tenant: subAccount, body: null })
})

t.test('a chunked body (transfer-encoding, no content-length) is hashed as it is read', async (t) => {
  const clock = { now: Math.floor(Date.now() / 1000) }
  const { app, writes } = await build(clock)
  t.teardown(() => app.close())
  await app.listen({ host: '127.0.0.1', port: 0 })
  const port = (app.server.address() as AddressInfo).port
  const post = (headers: Record<string, string>, chunks: string[]): Promise<{ status: number; body: string }> =>
    new Promise((resolve, reject) => {
      const request = httpRequest(
        { host: '127.0.0.1', port, method: 'POST', path: '/v1/things', headers: { ...headers, ...json, 'transfer-encoding': 'chunked' } },
        (response) => {
          let body = ''
          response.on('data', (chunk: Buffer) => (body += chunk.toString()))
          response.on('end', () => resolve({ status: response.statusCode ?? 0, body }))
        },
      )
      request.on('error', reject)
      for (const chunk of chunks) request.write(chunk)
      request.end()
    })
  const body = JSON.stringify({ name: 'chunked '.repeat(2000) })
  const chunks = [body.slice(0, 5), body.slice(5, 9000), body.slice(9000)]
  const ok = await post(signed('POST', '/v1/things', clock.now, { body }), chunks)
  t.equal(ok.status, 201, 'the digest of the whole body, read in pieces')
  const other = JSON.stringify({ name: 'chunkeD '.repeat(2000) })
  const bad = await post(signed('POST', '/v1/things', clock.now, { body }), [other.slice(0, 9000), other.slice(9000)])
  t.equal(bad.status, 401, 'one byte changed in the middle')
  t.same(JSON.parse(bad.body), refused)
  t.equal(writes.length, 1, 'the re-bodied request never reached the handler')
})

t.test('a nonce is remembered only once the signature verified', async (t) => {
  const clock = { now: T0 }
  const { app } = await build(clock)
  t.teardown(() => app.close())
  const nonce = newNonce()
  const forged = await app.inject({ method: 'GET', url: '/v1/tenant', headers: signed('GET', '/v1/tenant', clock.now, { nonce, key: otherAudienceSecret }) })
  t.equal(forged.statusCode, 401)
  const real = await app.inject({ method: 'GET', url: '/v1/tenant', headers: signed('GET', '/v1/tenant', clock.now, { nonce }) })
  t.equal(real.statusCode, 200, 'a forgery cannot burn the nonce of a real request')
  const again = await app.inject({ method: 'GET', url: '/v1/tenant?other=1', headers: signed('GET', '/v1/tenant?other=1', clock.now, { nonce }) })
  t.equal(again.statusCode, 401, 'the nonce is refused on any request, not just the same one')
})

t.test('the replay window holds either way, and a nonce is remembered as long as it could be accepted', async (t) => {
  const clock = { now: T0 }
  const { app, take } = await build(clock, 10)
  t.teardown(() => app.close())
  const rows: Array<[number, number]> = [
    [0, 200],
    [-10, 200],
    [10, 200],
    [-11, 401],
    [11, 401],
    [-86_400, 401],
  ]
  for (const [offset, status] of rows) {
    const response = await app.inject({ method: 'GET', url: '/v1/tenant', headers: signed('GET', '/v1/tenant', clock.now, { at: clock.now + offset }) })
    t.equal(response.statusCode, status, `signed ${offset} s from now`)
  }
  const later = signed('GET', '/v1/tenant', clock.now, { at: clock.now })
  clock.now += 11
  t.equal((await app.inject({ method: 'GET', url: '/v1/tenant', headers: later })).statusCode, 401, 'the same request, replayed after the window')

  // Signed 10 s ahead of this backend's clock (accepted at once), then replayed over the whole span it stays fresh.
  const ahead = signed('GET', '/v1/tenant', clock.now, { at: clock.now + 10 })
  t.equal((await app.inject({ method: 'GET', url: '/v1/tenant', headers: ahead })).statusCode, 200)
  take()
  for (const step of [5, 5, 5, 5]) {
    clock.now += step
    const replay = await app.inject({ method: 'GET', url: '/v1/tenant', headers: ahead })
    t.equal(replay.statusCode, 401, `replayed ${step} s later: still remembered`)
  }
  // Now exactly one window past its timestamp, two windows after it was first accepted: still fresh, so it must be remembered.
  t.match(
    take().map((line) => JSON.parse(line) as LogLine),
    Array(4).fill({ reason: 'replayed' }),
    'refused as replayed, not as stale',
  )
})

t.test('the nonce memory is two generations: O(1), bounded, and keeps each nonce at least one period', async (t) => {
  const memory = new NonceMemory(20)
  t.ok(memory.remember('a', 0))
  t.notOk(memory.remember('a', 19.9))
  t.ok(memory.remember('b', 20), 'a rotation: a moves to the previous generation')
  t.notOk(memory.remember('a', 39.9), 'still remembered in the previous generation')
  t.ok(memory.remember('c', 40), 'the second rotation drops a')
  t.ok(memory.remember('a', 40), 'a is forgotten only after a whole period')
  t.equal(memory.size, 3, 'b (previous), c and a (current)')
  t.notOk(memory.remember('c', 10), 'a clock that went back rotates nothing')
  t.ok(memory.remember('z', 1000), 'a long pause forgets everything at once')
  t.equal(memory.size, 1)
  for (let i = 0; i < 10_000; i++) memory.remember(`n${i}`, 1000 + i / 100)
  memory.remember('last', 1200)
  t.ok(memory.size < 10_002, `memory is bounded by two periods of requests (${memory.size})`)
})

t.test('which routes are unsigned is decided on the matched route, by whole segments', async (t) => {
  const clock = { now: T0 }
  const { app } = await build(clock)
  t.teardown(() => app.close())
  const rows: Array<[string, number]> = [
    ['/healthz', 200],
    ['/healthz/deep', 200],
    ['/console/page', 200],
    ['/console/no-such-page', 404],
    ['/console', 404],
    ['/consolex', 401],
    ['/consolex/no-such-page', 401],
    ['/v1/tenant', 401],
    ['/v1/no-such-route', 401],
    ['/healthzx', 401],
    ['/v1/tenant?x=/console', 401],
  ]
  for (const [url, status] of rows) {
    const response = await app.inject({ method: 'GET', url })
    t.equal(response.statusCode, status, url)
    if (status === 401) t.same(response.json(), refused, url)
  }
  const signedNotFound = await app.inject({ method: 'GET', url: '/v1/no-such-route', headers: signed('GET', '/v1/no-such-route', clock.now) })
  t.equal(signedNotFound.statusCode, 404, 'a signed caller gets the not-found answer')
})

t.test('a route that was left unsigned cannot read a tenant: it fails closed', async (t) => {
  const { app } = await build({ now: T0 })
  t.teardown(() => app.close())
  const response = await app.inject({ method: 'GET', url: '/console/leak', headers: signed('GET', '/console/leak', T0) })
  t.equal(response.statusCode, 401)
  t.same(response.json(), refused)
})

t.test('the verified tenant is handed to the route, and nothing else', async (t) => {
  const clock = { now: T0 }
  const { app } = await build(clock)
  t.teardown(() => app.close())
  for (const [tenant, key] of [
    [subAccount, secret],
    [agency, secret],
    [subAccount, previous],
  ] as const) {
    const response = await app.inject({
      method: 'GET',
      url: '/v1/tenant?sub_account_id=evil',
      headers: signed('GET', '/v1/tenant?sub_account_id=evil', clock.now, { tenant, key }),
    })
    t.equal(response.statusCode, 200)
    t.same(response.json(), { tenant })
  }
})

t.test('a route group can require a scope: another scope gets 403', async (t) => {
  const clock = { now: T0 }
  const { app } = await build(clock)
  t.teardown(() => app.close())
  const ok = await app.inject({ method: 'GET', url: '/v1/sub/things', headers: signed('GET', '/v1/sub/things', clock.now) })
  t.same(ok.json(), { subAccountId: 'sub-1' })
  const mismatch = await app.inject({ method: 'GET', url: '/v1/sub/things', headers: signed('GET', '/v1/sub/things', clock.now, { tenant: agency }) })
  t.equal(mismatch.statusCode, 403)
  t.same(mismatch.json(), { success: false, message: 'This API key does not have access to this resource' })
})

t.test('the verifier refuses to start without a secret or without an audience', async (t) => {
  const rows: Array<[Parameters<typeof tenantVerifier>[1], RegExp]> = [
    [{ audience, secrets: [] }, /at least one secret/],
    [{ audience: '', secrets: [secret] }, /an audience name is required/],
    [{ audience: 'Resource_Service', secrets: [secret] }, /an audience name is required/],
  ]
  for (const [options, message] of rows) {
    const app = Fastify()
    await app.register(errorEnvelopePlugin)
    app.register(tenantVerifier, options)
    await t.rejects(async () => {
      await app.ready()
    }, message)
  }
})

/** A backend's nonce client on `url`, as the services make it (createNonceRedis), connected; disconnected at teardown. */
async function nonceClient(t: Teardown, url: string, prefix: string): Promise<NonceRedis> {
  const client = createRedis(url, 'tenant-verifier-test-nonces')
  t.teardown(() => client.disconnect())
  await client.connect()
  return { client, prefix }
}

t.test('with Redis, a nonce one replica accepted is refused by every other replica of the backend', async (t) => {
  const redis = await createTestRedis(t)
  const clock = { now: Math.floor(Date.now() / 1000) }
  const replicas = [
    await build(clock, undefined, await nonceClient(t, redis.url, redis.prefix)),
    await build(clock, undefined, await nonceClient(t, redis.url, redis.prefix)),
  ]
  for (const { app } of replicas) t.teardown(() => app.close())
  const [one, two] = replicas as [Built, Built]
  const headers: Record<string, string> = { ...signed('POST', '/v1/things', clock.now, { body: bodyA }), ...json }
  const send = (replica: Built) => replica.app.inject({ method: 'POST', url: '/v1/things', headers, payload: bodyA })
  t.equal((await send(one)).statusCode, 201, 'the first replica accepts it')
  two.take()
  const replayed = await send(two)
  t.equal(replayed.statusCode, 401, 'the same request at the second replica')
  t.same(replayed.json(), refused)
  t.match(
    two.take().map((line) => JSON.parse(line) as LogLine),
    [{ reason: 'replayed' }],
    'refused as replayed',
  )
  t.same(two.writes, [], 'its handler never ran')
  const nonce = headers[tenantHeaders.nonce]!
  const ttl = await redis.client.pttl(nonceKey(redis.prefix, audience, nonce))
  t.ok(ttl > 0 && ttl <= 60_000, `kept in Redis for two windows (${ttl} ms left)`)
  t.equal((await send(one)).statusCode, 401, 'and at the first replica again')

  // Without Redis each process remembers only its own: one replica per backend, as the docs say.
  const alone = [await build(clock), await build(clock)]
  for (const { app } of alone) t.teardown(() => app.close())
  const other = { ...signed('GET', '/v1/tenant', clock.now) }
  t.equal((await alone[0]!.app.inject({ method: 'GET', url: '/v1/tenant', headers: other })).statusCode, 200)
  t.equal((await alone[0]!.app.inject({ method: 'GET', url: '/v1/tenant', headers: other })).statusCode, 401, 'a process refuses its own replay')
  t.equal((await alone[1]!.app.inject({ method: 'GET', url: '/v1/tenant', headers: other })).statusCode, 200, 'another process alone cannot know it')
})

t.test('Redis down, stalled or refusing writes: a signed request is refused with 503 and Retry-After, never accepted unchecked', async (t) => {
  const server = await startRedisServer(t)
  const clock = { now: Math.floor(Date.now() / 1000) }
  const replica = await build(clock, undefined, await nonceClient(t, server.url, 'sak-nonce-test:'))
  t.teardown(() => replica.app.close())
  const get = () => replica.app.inject({ method: 'GET', url: '/v1/tenant', headers: signed('GET', '/v1/tenant', clock.now) })
  const post = () =>
    replica.app.inject({ method: 'POST', url: '/v1/things', headers: { ...signed('POST', '/v1/things', clock.now, { body: bodyA }), ...json }, payload: bodyA })
  const unavailable = { success: false, message: 'Service temporarily unavailable' }
  const refusedNow = async (what: string, send: () => ReturnType<typeof get>) => {
    const started = performance.now()
    const response = await send()
    const ms = performance.now() - started
    t.equal(response.statusCode, 503, `${what}: 503`)
    t.same(response.json(), unavailable, `${what}: in the envelope`)
    t.equal(response.headers['retry-after'], String(UNAVAILABLE_RETRY_AFTER_SECONDS), `${what}: Retry-After`)
    return ms
  }
  t.equal((await get()).statusCode, 200, 'Redis up: served')

  // Stalled: writes wait at Redis; the client gives up at its 2 s command deadline.
  const control = server.client()
  await control.call('CLIENT', 'PAUSE', '4000', 'WRITE')
  const stalledMs = await refusedNow('Redis stalled', get)
  t.ok(stalledMs < 3_500, `the wait is bounded by the command deadline (${stalledMs.toFixed(0)} ms)`)
  await control.call('CLIENT', 'UNPAUSE')

  // Refusing writes: out of memory, nothing evicted.
  await server.configSet('maxmemory-policy', 'noeviction')
  await server.configSet('maxmemory', '1')
  await refusedNow('Redis refusing writes', post)
  t.same(replica.writes, [], 'no write ran')
  await server.configSet('maxmemory', '0')

  await server.stop()
  const downMs = await refusedNow('Redis down', get)
  t.ok(downMs < 1_000, `refused at once while disconnected (${downMs.toFixed(0)} ms)`)
  await refusedNow('Redis down, a write', post)
  t.same(replica.writes, [], 'no write ran')

  await server.start()
  let status = 0
  await waitFor(async () => (status = (await get()).statusCode) === 200, 'the client to reconnect')
  t.equal(status, 200, 'Redis back: served again')
})

t.test('the Redis user of docs/operations.md is enough for a backend, and reads nothing of the gateway', async (t) => {
  const server = await startRedisServer(t)
  const prefix = 'sak:'
  const control = server.client()
  // The line docs/operations.md gives, for resource-service under the default prefix.
  await control.call(
    'ACL',
    ...`SETUSER resource-service on >nonce-password resetkeys ~${prefix}nonce:${audience}:* resetchannels -@all +set +info +client|setname`.split(' '),
  )
  await control.set(`${prefix}key:0123`, 'a sealed key-cache entry')
  const url = `redis://resource-service:nonce-password@127.0.0.1:${server.port}`
  const clock = { now: Math.floor(Date.now() / 1000) }
  const replica = await build(clock, undefined, await nonceClient(t, url, prefix))
  t.teardown(() => replica.app.close())
  const headers = signed('GET', '/v1/tenant', clock.now)
  t.equal((await replica.app.inject({ method: 'GET', url: '/v1/tenant', headers })).statusCode, 200, 'a signed request is served')
  t.equal((await replica.app.inject({ method: 'GET', url: '/v1/tenant', headers })).statusCode, 401, 'its replay is refused')
  const as = createRedis(url, 'acl-probe')
  t.teardown(() => as.disconnect())
  await as.connect()
  await t.rejects(as.get(`${prefix}key:0123`), /NOPERM/, 'it cannot read the key cache')
  await t.rejects(as.set(`${prefix}key:0123`, 'forged'), /NOPERM/, 'nor write it')
  await t.rejects(as.set(`${prefix}nonce:${AGENCY_SERVICE_AUDIENCE}:x`, '1'), /NOPERM/, 'nor the other backend’s nonces')
  await t.rejects(as.del(nonceKey(prefix, audience, headers[tenantHeaders.nonce]!)), /NOPERM/, 'nor forget a nonce')
  await t.rejects(as.publish(`${prefix}invalidations`, 'x'), /NOPERM/, 'nor publish')
})
