/**
 * The gateway's connections to a backend (upstream.ts), against a real HTTP
 * server: never more connections than allowed, requests past them wait and
 * are served in order as connections come free, past the queue a request is
 * refused at once, and a backend that was down is reached as soon as it is
 * up again (its failed connections dropped and new ones made). Each tenant
 * holds at most its share (half the connections, a quarter of the queue),
 * and a connection that comes free goes to the waiting tenants in turn.
 */
import t from 'tap'
import { createServer } from 'node:http'
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { backendBounds, classifyTransportError, CONSOLE_TENANT, Upstreams, upstreamTenant } from '@scoped/gateway/upstream'
import type { UpstreamExchange } from '@scoped/gateway/upstream-backend'
import { Backend as UpstreamBackend } from '@scoped/gateway/upstream-backend'
import { freePort } from '../helpers/processes.js'
import { upstreamRequest } from '../helpers/upstream-request.js'
import { waitFor } from '../helpers/wait-for.js'

interface Backend {
  origin: string
  server: Server
  /** Connections the server has accepted. */
  sockets: Set<Socket>
  /** Request paths in the order they arrived. */
  seen: string[]
  /** Requests to /hold/… wait here until released. */
  held: Map<string, ServerResponse>
}

async function backend(port = 0): Promise<Backend> {
  const sockets = new Set<Socket>()
  const seen: string[] = []
  const held = new Map<string, ServerResponse>()
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const path = request.url ?? ''
    seen.push(path)
    if (path.startsWith('/hold/')) held.set(path, response)
    else response.end(`answer to ${path}`)
  })
  server.on('connection', (socket: Socket) => sockets.add(socket))
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())).then(() => undefined))
  t.teardown(() => server.closeAllConnections())
  const address = server.address()
  if (typeof address !== 'object' || address === null) throw new Error('no address')
  return { origin: `http://127.0.0.1:${address.port}`, server, sockets, seen, held }
}

function upstreams(connections: number, queue: number): Upstreams {
  const made = new Upstreams({ connections, queue, timeoutMs: 5_000 })
  t.teardown(() => made.close())
  return made
}

t.test('past its connections a request waits, and is served in order when one comes free; past the queue it is refused', async (t) => {
  const server = await backend()
  const pool = upstreams(1, 2)
  const holding = upstreamRequest(pool, server.origin, '/hold/1')
  await waitFor(() => server.held.has('/hold/1'), 'the first request to reach the backend')
  const second = upstreamRequest(pool, server.origin, '/second')
  const third = upstreamRequest(pool, server.origin, '/third')
  await t.rejects(upstreamRequest(pool, server.origin, '/fourth'), /upstream-busy/, 'one connection and two waiting: a fourth is refused at once')
  t.same(server.seen, ['/hold/1'], 'nothing else reached the backend while its one connection was taken')

  server.held.get('/hold/1')!.end('held answer')
  t.same(await holding, { status: 200, body: 'held answer' })
  t.same(await second, { status: 200, body: 'answer to /second' })
  t.same(await third, { status: 200, body: 'answer to /third' })
  t.same(server.seen, ['/hold/1', '/second', '/third'], 'the waiting requests went in the order they came')
  t.equal(server.sockets.size, 1, 'all on the one connection')
  t.same(await upstreamRequest(pool, server.origin, '/fifth'), { status: 200, body: 'answer to /fifth' }, 'and the queue is free again')
})

/** Answers the held request at `path` (it must have reached the backend). */
function answer(server: Backend, path: string): void {
  const response = server.held.get(path)
  if (response === undefined) throw new Error(`${path} is not held`)
  server.held.delete(path)
  response.end(`held ${path}`)
}

t.test('a tenant holds at most half the connections and a quarter of the queue; another tenant is served at once', async (t) => {
  const server = await backend()
  const pool = upstreams(4, 8)
  const flood = ['a1', 'a2', 'a3', 'a4'].map((name) => upstreamRequest(pool, server.origin, `/hold/${name}`, 'tenant A'))
  await waitFor(() => server.held.size === 2, "two of tenant A's requests to reach the backend")
  // Two on connections and two in its line (a quarter of the queue): a fifth is refused at once, however free the queue.
  await t.rejects(upstreamRequest(pool, server.origin, '/hold/a5', 'tenant A'), /upstream-share/, 'past its share: refused at once')
  t.same(await upstreamRequest(pool, server.origin, '/b1', 'tenant B'), { status: 200, body: 'answer to /b1' }, 'tenant B takes a free connection at once')
  t.same([...server.held.keys()], ['/hold/a1', '/hold/a2'], "tenant A's other two wait for its own connections")

  answer(server, '/hold/a1')
  await waitFor(() => server.held.has('/hold/a3'), "tenant A's next request to take its connection")
  for (const path of ['/hold/a2', '/hold/a3']) answer(server, path)
  await waitFor(() => server.held.has('/hold/a4'), 'and its last')
  answer(server, '/hold/a4')
  t.same(
    (await Promise.all(flood)).map((answered) => answered.status),
    [200, 200, 200, 200],
    'every request it was given a place for is answered',
  )
  t.ok(server.sockets.size <= 4, `never more than four connections (${server.sockets.size})`)
})

t.test('the console has connections of its own: a flood of console requests holds none of the API’s, and waits in a bounded line', async (t) => {
  const server = await backend()
  const pool = upstreams(4, 8)
  // The console's own: a quarter of the connections (one) and of the queue (two).
  const flood = ['c1', 'c2', 'c3'].map((name) => upstreamRequest(pool, server.origin, `/hold/${name}`, CONSOLE_TENANT))
  await waitFor(() => server.held.has('/hold/c1'), 'the first console request to reach the backend')
  await t.rejects(upstreamRequest(pool, server.origin, '/hold/c4', CONSOLE_TENANT), /upstream-(busy|share)/, 'past its own line: refused at once, not queued')
  const api = ['a1', 'a2', 'b1', 'b2'].map((name) => upstreamRequest(pool, server.origin, `/hold/${name}`, `tenant ${name[0]!}`))
  await waitFor(() => ['/hold/a1', '/hold/a2', '/hold/b1', '/hold/b2'].every((path) => server.held.has(path)), 'every API request to reach the backend')
  t.same(
    [...server.held.keys()].filter((path) => path.startsWith('/hold/c')),
    ['/hold/c1'],
    'the API took all four of its connections while the console held its one',
  )
  t.equal(server.sockets.size, 5, 'four connections for the API and one of the console’s own')
  for (const path of ['/hold/a1', '/hold/a2', '/hold/b1', '/hold/b2']) answer(server, path)
  t.same(
    (await Promise.all(api)).map((answered) => answered.status),
    [200, 200, 200, 200],
  )
  for (const name of ['c1', 'c2', 'c3']) {
    await waitFor(() => server.held.has(`/hold/${name}`), `console request ${name} to reach the backend`)
    answer(server, `/hold/${name}`)
  }
  t.same(
    (await Promise.all(flood)).map((answered) => answered.status),
    [200, 200, 200],
    'and the console’s line is served in turn',
  )
})

t.test('a free connection goes to the waiting tenants in turn, not to the tenant that has waited longest', async (t) => {
  const server = await backend()
  // One connection per tenant, two places in each line.
  const pool = upstreams(2, 8)
  const a = ['a1', 'a2'].map((name) => upstreamRequest(pool, server.origin, `/hold/${name}`, 'tenant A'))
  await waitFor(() => server.held.has('/hold/a1'), "tenant A's first request to reach the backend")
  const b = ['b1', 'b2'].map((name) => upstreamRequest(pool, server.origin, `/hold/${name}`, 'tenant B'))
  await waitFor(() => server.held.has('/hold/b1'), "tenant B's first request to reach the backend")
  const c = upstreamRequest(pool, server.origin, '/hold/c1', 'tenant C')
  t.same(server.seen, ['/hold/a1', '/hold/b1'], 'both connections taken, a2, b2 and c1 waiting (in that order)')

  answer(server, '/hold/a1')
  await waitFor(() => server.seen.length === 3, 'the freed connection to carry the next request')
  t.equal(server.seen[2], '/hold/c1', 'tenant C, whose turn it is, not a2 that came first: A already had its connection')
  answer(server, '/hold/b1')
  await waitFor(() => server.seen.length === 4, 'the next')
  t.equal(server.seen[3], '/hold/a2', 'then tenant A again, before tenant B (C holds its one)')
  for (const path of ['/hold/c1', '/hold/a2']) answer(server, path)
  await waitFor(() => server.held.has('/hold/b2'), "and tenant B's second")
  answer(server, '/hold/b2')
  t.same(
    (await Promise.all([...a, ...b, c])).map((answered) => answered.status),
    [200, 200, 200, 200, 200],
  )
})

t.test('the tenant of a request: the sub-account of a sub-account key, the agency of an agency key, one for the console', async (t) => {
  const key = { agencyId: 'agency-1', keyId: 'key-1' }
  t.equal(upstreamTenant({ ...key, scope: 'SUB-ACCOUNT', subAccountId: 'sub-1' }), 'sub-1')
  t.equal(upstreamTenant({ ...key, scope: 'AGENCY', subAccountId: null }), 'agency-1')
  t.equal(upstreamTenant(null), CONSOLE_TENANT)
  t.same(backendBounds(64, 256), { connections: 64, queue: 256, tenantConnections: 32, tenantQueue: 64 }, 'the defaults: 32 and 64')
  t.same(backendBounds(1, 0), { connections: 1, queue: 0, tenantConnections: 1, tenantQueue: 0 }, 'one connection: a tenant may use it, and never wait')
})

t.test("idle tenants' shares are forgotten, a busy tenant's is kept", async (t) => {
  const server = await backend()
  const origin = new UpstreamBackend(server.origin, backendBounds(2, 2), {})
  t.teardown(() => origin.close())
  const busy = origin.share('busy tenant')
  let ended = false
  const exchange: UpstreamExchange = {
    connection: null,
    onRequestStart() {},
    onResponseStart() {},
    onResponseData() {},
    onResponseEnd() {
      origin.finished(busy, exchange)
      ended = true
    },
    onResponseError() {
      origin.finished(busy, exchange)
      ended = true
    },
  }
  busy.dispatch({ method: 'GET', path: '/hold/busy' }, exchange)
  await waitFor(() => server.held.has('/hold/busy'), "the busy tenant's request to reach the backend")
  const first = origin.share('tenant 0')
  for (let i = 1; i < 5_000; i++) origin.share(`tenant ${i}`)
  t.ok(origin.tenantCount <= 2_048, `idle shares swept: ${origin.tenantCount} kept`)
  t.not(origin.share('tenant 0'), first, 'an idle tenant was forgotten (and is made again)')
  t.equal(origin.share('busy tenant'), busy, 'the tenant with a request running was kept')
  answer(server, '/hold/busy')
  await waitFor(() => ended, 'the busy request to end')
})

t.test('never more connections than allowed, however many requests come at once', async (t) => {
  const server = await backend()
  const pool = upstreams(3, 20)
  const paths = Array.from({ length: 20 }, (_, i) => `/hold/${i}`)
  const answers = paths.map((path) => upstreamRequest(pool, server.origin, path))
  await waitFor(() => server.held.size === 3, 'three requests to reach the backend')
  t.equal(server.sockets.size, 3, 'three connections')
  // Each answer frees its connection for the next waiting request.
  for (let answered = 0; answered < paths.length; answered++) {
    await waitFor(() => server.held.size > 0, 'a request to answer')
    const [path, response] = server.held.entries().next().value as [string, ServerResponse]
    server.held.delete(path)
    response.end('ok')
  }
  const statuses = (await Promise.all(answers)).map((answer) => answer.status)
  t.same(
    statuses,
    paths.map(() => 200),
    'every request answered',
  )
  t.equal(server.sockets.size, 3, 'still three connections')
})

t.test('a backend that is down is a transport error, and is reached again once it is up', async (t) => {
  const port = await freePort()
  const origin = `http://127.0.0.1:${port}`
  const pool = upstreams(2, 4)
  const refused = await upstreamRequest(pool, origin, '/while-down').then(
    () => null,
    (error: unknown) => error,
  )
  t.ok(refused instanceof Error, 'the request fails')
  t.equal(classifyTransportError(refused), 'upstream-error', 'as a 502, not a timeout')
  const failures = await Promise.allSettled([1, 2, 3].map((i) => upstreamRequest(pool, origin, `/while-down/${i}`)))
  t.same(
    failures.map((failure) => failure.status),
    ['rejected', 'rejected', 'rejected'],
    'more requests than connections fail too, none is left waiting',
  )

  const server = await backend(port)
  t.same(await upstreamRequest(pool, origin, '/after'), { status: 200, body: 'answer to /after' }, 'served once the backend is up')
  const again = await Promise.all([1, 2, 3, 4].map((i) => upstreamRequest(pool, origin, `/after/${i}`)))
  t.same(
    again.map((answer) => answer.status),
    [200, 200, 200, 200],
  )
  t.ok(server.sockets.size <= 2, `at most two connections (${server.sockets.size})`)
})

t.test('close ends the connections, and nothing goes out after it', async (t) => {
  const server = await backend()
  const pool = new Upstreams({ connections: 2, queue: 0, timeoutMs: 5_000 })
  await upstreamRequest(pool, server.origin, '/one')
  t.equal(server.sockets.size, 1)
  const [socket] = [...server.sockets]
  const closed = new Promise<void>((resolve) => socket!.once('close', () => resolve()))
  await pool.close()
  await closed
  t.pass('the backend saw its connection close')
  const after = await upstreamRequest(pool, server.origin, '/after-close').then(
    () => null,
    (error: unknown) => error,
  )
  t.ok(after instanceof Error, 'a request after close fails')
  t.equal(classifyTransportError(after), 'upstream-error', 'as a 502')
  t.same(server.seen, ['/one'], 'and never reached the backend')
  t.equal(server.sockets.size, 1, 'no connection was opened for it')

  const unused = new Upstreams({ connections: 2, queue: 0, timeoutMs: 5_000 })
  await unused.close()
  await t.rejects(upstreamRequest(unused, server.origin, '/never'), 'closed before it ever connected: refused too')
  t.same(server.seen, ['/one'], 'nothing reached the backend')
  t.equal(server.sockets.size, 1)
})
