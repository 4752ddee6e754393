/**
 * The gateway's connections to a backend (upstream.ts), against a real HTTP
 * server: never more connections than allowed, requests past them wait and
 * are served in order as connections come free, past the queue a request is
 * refused at once, and a backend that was down is reached as soon as it is
 * up again (its failed connections dropped and new ones made).
 */
import t from 'tap'
import { createServer } from 'node:http'
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { classifyTransportError, Upstreams } from '@scoped/gateway/upstream'
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
  await t.rejects(upstreamRequest(pool, server.origin, '/fourth'), /upstream busy/, 'one connection and two waiting: a fourth is refused at once')
  t.same(server.seen, ['/hold/1'], 'nothing else reached the backend while its one connection was taken')

  server.held.get('/hold/1')!.end('held answer')
  t.same(await holding, { status: 200, body: 'held answer' })
  t.same(await second, { status: 200, body: 'answer to /second' })
  t.same(await third, { status: 200, body: 'answer to /third' })
  t.same(server.seen, ['/hold/1', '/second', '/third'], 'the waiting requests went in the order they came')
  t.equal(server.sockets.size, 1, 'all on the one connection')
  t.same(await upstreamRequest(pool, server.origin, '/fifth'), { status: 200, body: 'answer to /fifth' }, 'and the queue is free again')
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
