/**
 * What an unauthenticated (or careless) client on the internet can do to the
 * gateway, tried against a real gateway replica (in the test's process) over
 * TLS: slow bodies and headers, oversized targets and headers, floods of
 * invalid keys, spoofed X-Forwarded-For, Expect: 100-continue, over-deep
 * JSON, a full upstream pool (and one whose queue still has room), one
 * tenant flooding a slow backend, a backend down and back. None of it may
 * slow down, starve or blind the service for valid keys.
 */
import t from 'tap'
import type { Test } from 'tap'
import { createServer } from 'node:http'
import type { ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { connect } from 'node:tls'
import type { TLSSocket } from 'node:tls'
import { errorCatalog, UNAVAILABLE_RETRY_AFTER_SECONDS } from '@scoped/shared/errors'
import { generateKey } from '@scoped/shared/keys'
import type { Echo } from '../helpers/echo-upstream.js'
import { rawHttpsRequest, rawStatus } from '../helpers/https.js'
import { waitFor } from '../helpers/wait-for.js'
import { gatewayFixture } from './fixture.js'

const fixture = await gatewayFixture(t)
const agencyKey = await fixture.createKey('agency', 'agency key')
const subKey = await fixture.createKey('sub-account', 'sub key')
const otherSubKey = await fixture.keys.create({ scope: 'SUB-ACCOUNT', subAccountId: fixture.tenants.otherSubAccountId }, 'other sub key', 'test')
const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` })

/** A TLS connection to the replica, for bytes no HTTP client would send (or would send that slowly). */
function openSocket(port: number): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, ca: fixture.ca, servername: 'localhost' }, () => resolve(socket))
    socket.once('error', reject)
  })
}

function collect(socket: TLSSocket): Promise<string> {
  return new Promise((resolve) => {
    let text = ''
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')))
    socket.on('error', () => resolve(text))
    socket.on('close', () => resolve(text))
  })
}

/** The body of a raw HTTP/1.1 response, de-chunked when it came chunked. */
function bodyOf(raw: string): string {
  const split = raw.indexOf('\r\n\r\n')
  const head = raw.slice(0, split).toLowerCase()
  let body = raw.slice(split + 4)
  if (!head.includes('transfer-encoding: chunked')) return body
  let out = ''
  for (;;) {
    const line = body.indexOf('\r\n')
    const size = parseInt(body.slice(0, line), 16)
    if (!(size > 0)) return out
    out += body.slice(line + 2, line + 2 + size)
    body = body.slice(line + 2 + size + 2)
  }
}

function jsonBody(raw: string): { success?: boolean; message?: string } | undefined {
  try {
    return JSON.parse(bodyOf(raw)) as { success?: boolean; message?: string }
  } catch {
    return undefined
  }
}

t.test('160 slow bodies to /console hold no backend connection: an authenticated request is not delayed', async (t) => {
  const replica = await fixture.startReplica(
    { GATEWAY_UPSTREAM_CONNECTIONS: '16', GATEWAY_BODY_TIMEOUT_MS: '20000', GATEWAY_REQUEST_TIMEOUT_MS: '30000' },
    { t },
  )
  t.equal((await replica.client.request('/v1/agency', { headers: bearer(agencyKey.key) })).status, 200, 'warm')
  // Requests whose headers the gateway has read (the slow ones: their bodies are still coming).
  let arrived = 0
  const onRequest = (): void => {
    arrived++
  }
  replica.gateway.api.server.on('request', onRequest)
  t.teardown(() => replica.gateway.api.server.off('request', onRequest))
  const sockets = await Promise.all(Array.from({ length: 160 }, () => openSocket(replica.ports.api)))
  t.teardown(() => sockets.forEach((socket) => socket.destroy()))
  for (const socket of sockets) {
    socket.on('error', () => undefined)
    socket.write('POST /console/sign-in HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 8000\r\n\r\ne')
  }
  const trickle = setInterval(() => sockets.forEach((socket) => socket.write('m')), 500)
  t.teardown(() => clearInterval(trickle))
  // Not a guessed delay: every slow request is at the gateway, its body still coming.
  await waitFor(() => arrived >= sockets.length, 'every slow request to reach the gateway')
  const started = performance.now()
  const response = await replica.client.request('/v1/agency', { headers: bearer(agencyKey.key) })
  const elapsed = performance.now() - started
  t.equal(response.status, 200, 'the authenticated request succeeds')
  // Held connections would delay it by the 20 s body timeout; the margin is for a busy machine.
  t.ok(elapsed < 5_000, `and is not delayed by the slow bodies (${elapsed.toFixed(0)} ms)`)
  t.notOk(fixture.echo.output().includes('echo: POST /console/sign-in'), 'no incomplete body reached the backend')
})

t.test('deadlines: a body that does not arrive in time gets 408 and is never forwarded; slow headers are cut', async (t) => {
  const replica = await fixture.startReplica({ GATEWAY_BODY_TIMEOUT_MS: '1000', GATEWAY_HEADERS_TIMEOUT_MS: '1000', GATEWAY_REQUEST_TIMEOUT_MS: '3000' }, { t })
  for (const [path, headers] of [
    ['/console/sign-in?held=1', ''],
    ['/v1/agents?held=1', `Authorization: Bearer ${subKey.key}\r\n`],
  ] as const) {
    const socket = await openSocket(replica.ports.api)
    const answer = collect(socket)
    socket.write(`POST ${path} HTTP/1.1\r\nHost: localhost\r\n${headers}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":`)
    const raw = await answer
    t.equal(rawStatus(raw), 408, `${path}: 408`)
    t.same(jsonBody(raw), { success: false, message: errorCatalog.requestTimeout.message }, 'in the envelope')
  }
  t.notOk(fixture.echo.output().includes('held=1'), 'neither reached the backend')

  const socket = await openSocket(replica.ports.api)
  const answer = collect(socket)
  socket.write('GET /v1/agents HTTP/1.1\r\nHost: localhost\r\n')
  const raw = await answer
  t.ok(raw === '' || rawStatus(raw) === 408, `headers never completed: 408 or closed (${raw.slice(0, 40)})`)
})

t.test('size caps: a long request target gets 414, a large header block 431, both in the envelope and at once', async (t) => {
  const replica = await fixture.startReplica({}, { t })
  const long = await replica.client.request(`/v1/agents/${'a'.repeat(16_000)}/_live_`)
  t.equal(long.status, 414)
  t.same(long.json, { success: false, message: errorCatalog.uriTooLong.message })
  const valid = await replica.client.request('/v1/agents', { headers: bearer(subKey.key) })
  t.equal(valid.status, 200, 'the next request is served')
  const raw = await rawHttpsRequest(replica.ports.api, fixture.ca, `GET /v1/agents HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'b'.repeat(20_000)}\r\n\r\n`)
  t.equal(rawStatus(raw), 431)
  t.same(jsonBody(raw), { success: false, message: errorCatalog.headersTooLarge.message })
  // The 414's line is written once its response has gone out: checked once it is there.
  await waitFor(() => replica.output().includes('"status":414'), 'the log line of the 414')
  const lines = replica.output().split('\n')
  t.ok(
    lines.every((line) => line.length < 2_000),
    'no log line carries the long path',
  )
})

t.test('failed authentication is throttled per client address for keys never issued; issued keys keep working', async (t) => {
  // The test is one address; trusting loopback as a proxy lets X-Forwarded-For stand for many clients.
  const replica = await fixture.startReplica({ GATEWAY_TRUSTED_PROXIES: '127.0.0.1', GATEWAY_AUTH_FAILURE_LIMIT: '5' }, { t })
  const as = (address: string, key: string): Record<string, string> => ({ ...bearer(key), 'x-forwarded-for': address })
  t.equal((await replica.client.request('/v1/agents', { headers: as('203.0.113.9', subKey.key) })).status, 200, 'a valid key, now in memory')
  for (let i = 0; i < 5; i++) {
    t.equal((await replica.client.request('/v1/agents', { headers: as('203.0.113.9', generateKey()) })).status, 401, `unknown key ${i + 1}: 401`)
  }
  const throttled = await replica.client.request('/v1/agents', { headers: as('203.0.113.9', generateKey()) })
  t.equal(throttled.status, 429)
  t.same(throttled.json, { success: false, message: errorCatalog.tooManyAuthFailures.message })
  t.match(throttled.headers['retry-after'], /^\d+$/, 'Retry-After')
  t.match(throttled.headers['ratelimit-policy'], /;q=5;w=60$/, 'RateLimit-Policy')
  t.match(throttled.headers['ratelimit'], /;r=0;t=\d+$/, 'RateLimit')
  t.equal(
    (await replica.client.request('/v1/agents', { headers: as('203.0.113.9', subKey.key) })).status,
    200,
    'the valid key in memory still works from that address',
  )
  const fresh = await fixture.createKey('sub-account', 'not yet verified')
  t.equal(
    (await replica.client.request('/v1/agents', { headers: as('203.0.113.9', fresh.key) })).status,
    200,
    'an issued key never seen by this replica: looked up and 200, whatever its address sent before',
  )
  t.equal((await replica.client.request('/v1/agents', { headers: as('198.51.100.7', fresh.key) })).status, 200, 'another client is not affected')
  const echo = (await replica.client.request('/v1/agents', { headers: as('198.51.100.7', fresh.key) })).json as Echo
  t.equal(echo.headers['x-forwarded-for'], '198.51.100.7', 'the backend is told the client the trusted proxy named')
})

t.test('X-Forwarded-For from an untrusted peer is ignored: the backend sees the peer, and throttling counts the peer', async (t) => {
  const replica = await fixture.startReplica({}, { t })
  const echo = (await replica.client.request('/v1/agents', { headers: { ...bearer(subKey.key), 'x-forwarded-for': '10.9.9.9', forwarded: 'for=10.9.9.9' } }))
    .json as Echo
  t.equal(echo.headers['x-forwarded-for'], '127.0.0.1')
  t.notOk(echo.headers.forwarded, 'Forwarded is not passed on')
  const session = (await replica.client.request('/console/sign-in', { headers: { 'x-forwarded-for': '10.9.9.9' } })).json as Echo
  t.equal(session.headers['x-forwarded-for'], '127.0.0.1', 'console routes too')
})

t.test('Expect: 100-continue works on every method with a body, and is not passed on', async (t) => {
  const replica = await fixture.startReplica({}, { t })
  for (const method of ['POST', 'PUT', 'PATCH', 'DELETE'] as const) {
    const body = JSON.stringify({ name: `via ${method}` })
    // As curl and .NET do: the headers, then the body only once the server has said 100 Continue.
    const socket = await openSocket(replica.ports.api)
    const answer = collect(socket)
    socket.write(
      `${method} /v1/contacts HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${subKey.key}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${body.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`,
    )
    await new Promise<void>((resolve) =>
      socket.once('data', (chunk: Buffer) => (t.match(chunk.toString(), /^HTTP\/1\.1 100 Continue/, `${method}: 100 Continue`), resolve())),
    )
    socket.write(body)
    const raw = await answer
    const final = raw.slice(raw.indexOf('\r\n\r\n') + 4)
    t.equal(rawStatus(final), 200, `${method} answered`)
    const echo = jsonBody(final) as unknown as Echo
    t.same(JSON.parse(echo.body), { name: `via ${method}` }, `${method}: the body arrived`)
    t.notOk(echo.headers.expect, 'no Expect upstream')
  }
})

t.test('JSON nesting is bounded on API routes (400, never a 500); console bodies are not parsed at the gateway', async (t) => {
  const replica = await fixture.startReplica({}, { t })
  const deep = '['.repeat(500_000) + ']'.repeat(500_000)
  const api = await replica.client.request('/v1/contacts', {
    method: 'POST',
    headers: { ...bearer(subKey.key), 'content-type': 'application/json' },
    body: deep,
  })
  t.equal(api.status, 400)
  t.same(api.json, { success: false, message: errorCatalog.tooDeep.message })
  const console = await replica.client.request('/console/sign-in', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '[[[1]]]' })
  t.equal((console.json as Echo).body, '[[[1]]]', 'forwarded byte for byte')
})

t.test('a full upstream pool answers 503 at once instead of queueing without end', async (t) => {
  // The backend holds each of the two slow requests 2 s (within this replica's upstream timeout): long enough,
  // however busy the machine, for the third request to find both connections taken. One each from two
  // tenants (a tenant may hold only half the connections), and the third from a third: the agency. (The console
  // has connections of its own: test/gateway/upstream.test.ts.)
  const replica = await fixture.startReplica({ GATEWAY_UPSTREAM_CONNECTIONS: '2', GATEWAY_UPSTREAM_QUEUE: '0', GATEWAY_UPSTREAM_TIMEOUT_MS: '10000' }, { t })
  const slow = [subKey, otherSubKey].map((key, i) =>
    replica.client.request(`/v1/agents?pool-holder=${i + 1}`, { headers: { ...bearer(key.key), 'x-echo-delay-ms': '2000' } }),
  )
  // Both hold a connection once the backend has their requests (the echo prints each request line as it arrives).
  await waitFor(() => [1, 2].every((i) => fixture.echo.output().includes(`pool-holder=${i}`)), 'both slow requests to reach the backend')
  const busy = await replica.client.request('/v1/agency', { headers: bearer(agencyKey.key) })
  t.equal(busy.status, 503)
  t.same(busy.json, { success: false, message: errorCatalog.upstreamBusy.message })
  t.equal(busy.headers['retry-after'], String(UNAVAILABLE_RETRY_AFTER_SECONDS), 'with when to retry')
  for (const response of await Promise.all(slow)) t.equal(response.status, 200, 'the requests holding the pool complete')
  t.equal((await replica.client.request('/v1/agents', { headers: bearer(subKey.key) })).status, 200, 'and the pool serves again')
})

t.test('requests past the upstream connections wait within the queue and are served once a connection is free', async (t) => {
  // A queue of 8: two places in the line of each tenant.
  const replica = await fixture.startReplica({ GATEWAY_UPSTREAM_CONNECTIONS: '1', GATEWAY_UPSTREAM_QUEUE: '8', GATEWAY_UPSTREAM_TIMEOUT_MS: '10000' }, { t })
  const get = (query: string, headers: Record<string, string> = {}) =>
    replica.client.request(`/v1/agents?${query}`, { headers: { ...bearer(subKey.key), ...headers } })
  const holding = get('queue-order=1', { 'x-echo-delay-ms': '1000' })
  await waitFor(() => fixture.echo.output().includes('queue-order=1'), 'the first request to reach the backend')
  const waiting = [get('queue-order=2'), get('queue-order=3')]
  const statuses = (await Promise.all([holding, ...waiting])).map((response) => response.status)
  t.same(statuses, [200, 200, 200], 'all three answered by the backend, none refused')
  const output = fixture.echo.output()
  const positions = [1, 2, 3].map((i) => output.indexOf(`queue-order=${i}`))
  t.ok(
    positions.every((position) => position >= 0),
    'each reached the backend',
  )
  // Between the two that waited the order is their arrival at the gateway, which the test cannot fix (the queue's own order: upstream.test.ts).
  t.ok(positions[0]! < Math.min(positions[1]!, positions[2]!), 'only once the one connection was free')
})

/** A slow backend: requests whose path has `hold` wait until the test answers them; others are answered at once. */
async function slowBackend(t: Test): Promise<{ origin: string; held: Map<string, ServerResponse>; answerAll: () => void }> {
  const held = new Map<string, ServerResponse>()
  const server = createServer((request, response) => {
    request.resume()
    if (request.url?.includes('hold') === true) held.set(request.url, response)
    else response.writeHead(200, { 'content-type': 'application/json' }).end('{"success":true,"data":[]}')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  t.teardown(() => server.closeAllConnections())
  const answerAll = (): void => {
    for (const response of held.values()) response.writeHead(200, { 'content-type': 'application/json' }).end('{"success":true,"data":[]}')
    held.clear()
  }
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, held, answerAll }
}

t.test('a tenant flooding a slow backend holds only its share: another tenant and the console are served at once', async (t) => {
  const backend = await slowBackend(t)
  const routes = fixture.routesFile(`routes:
  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "${backend.origin}" }
  - { prefix: /console, auth: session, upstream: "${backend.origin}" }
`)
  // Four connections and a queue of four: a tenant holds two and has one place in its line.
  const replica = await fixture.startReplica(
    { ROUTES_FILE: routes, GATEWAY_UPSTREAM_CONNECTIONS: '4', GATEWAY_UPSTREAM_QUEUE: '4', GATEWAY_UPSTREAM_TIMEOUT_MS: '30000' },
    { t },
  )
  t.teardown(backend.answerAll)
  let refused = 0
  const flood = Array.from({ length: 8 }, (_, i) =>
    replica.client.request(`/v1/agents?hold=${i}`, { headers: bearer(subKey.key) }).then((response) => {
      if (response.status !== 200) refused++
      return response
    }),
  )
  await waitFor(() => backend.held.size === 2 && refused === 5, 'two of the flood to reach the backend, one to wait, five to be refused')

  const bystander = await Promise.all([1, 2, 3].map((i) => replica.client.request(`/v1/agents?bystander=${i}`, { headers: bearer(otherSubKey.key) })))
  t.same(
    bystander.map((response) => response.status),
    [200, 200, 200],
    'the other tenant is served while the flood holds its connections',
  )
  const console = await Promise.all([1, 2].map(() => replica.client.request('/console/sign-in')))
  t.same(
    console.map((response) => response.status),
    [200, 200],
    'and so is the console',
  )
  t.equal(backend.held.size, 2, 'the flood still holds its two, and no more')

  backend.answerAll()
  await waitFor(() => backend.held.size === 1, "the flood's waiting request to take one of its connections")
  backend.answerAll()
  const answers = await Promise.all(flood)
  t.same(answers.map((response) => response.status).sort(), [200, 200, 200, 503, 503, 503, 503, 503], 'the flooder: three answered, the rest refused at once')
  for (const response of answers.filter((answer) => answer.status === 503)) {
    t.same(response.json, { success: false, message: errorCatalog.upstreamBusy.message })
    t.equal(response.headers['retry-after'], String(UNAVAILABLE_RETRY_AFTER_SECONDS), 'with when to retry')
  }
  t.match(replica.output(), /"outcome":"upstream-share"/, 'logged as over its share of the backend')
})

t.test('a backend that was down is reached as soon as it is up, by the same replica', async (t) => {
  const replica = await fixture.startReplica({}, { t })
  const get = () => replica.client.request('/v1/agents/down', { headers: bearer(subKey.key) })
  const down = await get()
  t.equal(down.status, 502, 'nothing listens: 502')
  t.same(down.json, { success: false, message: errorCatalog.badGateway.message })
  const backend = createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json' }).end('{"success":true,"data":[]}')
  })
  await new Promise<void>((resolve) => backend.listen(fixture.downPort, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => backend.close(() => resolve())))
  t.teardown(() => backend.closeAllConnections())
  t.equal((await get()).status, 200, 'up: served at once')
  const statuses = (await Promise.all(Array.from({ length: 8 }, () => get()))).map((response) => response.status)
  t.same(statuses, Array(8).fill(200), 'and under concurrent requests')
})

t.test('a caller that goes away mid-request frees its backend connection at once, not when the backend answers', async (t) => {
  // One upstream connection, no queue: while the departed caller's request held it, every other request would
  // get 503. The backend would hold that request 30 s (within this replica's upstream timeout), so a 200 well
  // before then shows the gateway aborted the backend request when the caller's connection closed.
  const replica = await fixture.startReplica({ GATEWAY_UPSTREAM_CONNECTIONS: '1', GATEWAY_UPSTREAM_QUEUE: '0', GATEWAY_UPSTREAM_TIMEOUT_MS: '60000' }, { t })
  const socket = await openSocket(replica.ports.api)
  socket.on('error', () => undefined)
  socket.write(`GET /v1/agents?departing=1 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${subKey.key}\r\nx-echo-delay-ms: 30000\r\n\r\n`)
  await waitFor(() => fixture.echo.output().includes('departing=1'), 'the request to reach the backend')
  t.equal((await replica.client.request('/v1/agents', { headers: bearer(subKey.key) })).status, 503, 'while it waits, the one connection is taken')
  socket.destroy()
  let status = 0
  await waitFor(
    async () => (status = (await replica.client.request('/v1/agents', { headers: bearer(subKey.key) })).status) === 200,
    'the connection to be free again',
    10_000,
  )
  t.equal(status, 200, 'the next caller is served, long before the backend would have answered the one that left')
})

t.test('a body over the limit (413) does not end the replica when its body deadline passes', async (t) => {
  // Once the body parser has given up on a body over the limit, its body deadline must not fire on the body's
  // pass-through (an error no one listens to would end the process). A replica as a process, so that such an
  // end is seen as an exit, not as the test runner's crash; no key: an anonymous POST to a console route is enough.
  const bodyTimeoutMs = 500
  const replica = await fixture.startReplicaProcess({ GATEWAY_BODY_TIMEOUT_MS: String(bodyTimeoutMs) }, { t })
  const refused = await replica.client.request('/console/sign-in', {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: Buffer.alloc(1024 * 1024 + 10),
  })
  t.equal(refused.status, 413, 'an anonymous body over the limit: 413')
  // Waiting the deadline out is the point here: whether the replica is still there well after it.
  const after = await Promise.race([replica.process.exited.then((code) => `exited with ${code}`), sleep(bodyTimeoutMs + 2_000).then(() => 'running')])
  t.equal(after, 'running', `still running after the body deadline (${after})`)
  if (after === 'running') t.equal((await replica.client.request('/v1/agents', { headers: bearer(subKey.key) })).status, 200, 'and serving')
})
