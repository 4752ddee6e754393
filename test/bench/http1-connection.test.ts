/**
 * The load generators' HTTP/1.1 client against real servers: what it sends,
 * how it frames answers (Content-Length, chunked, none for 204, interim 1xx,
 * split across reads), and that a connection closed by the target, or an
 * answer it cannot frame, counts as an error and the next request opens a
 * new connection.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:http'
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import { createServer as createTcpServer } from 'node:net'
import type { AddressInfo, Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { Http1Connection, requestHead } from '../../scripts/bench/http1-connection.js'
import { makeCertificate } from '../helpers/https.js'
import type { Teardown } from '../helpers/teardown.js'

type Handler = (request: IncomingMessage, response: ServerResponse) => void

async function listening(server: Server | ReturnType<typeof createTcpServer>, test: Teardown): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  test.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return (server.address() as AddressInfo).port
}

/** A node:http server answering by path; counts the connections it accepted. */
async function httpTarget(test: Teardown, handlers: Record<string, Handler>): Promise<{ url: URL; connections: () => number; seen: IncomingMessage[] }> {
  const seen: IncomingMessage[] = []
  let connections = 0
  const server = createServer((request, response) => {
    seen.push(request)
    handlers[request.url ?? '']!(request, response)
  })
  server.on('connection', () => connections++)
  const port = await listening(server, test)
  test.teardown(() => server.closeAllConnections())
  return { url: new URL(`http://127.0.0.1:${port}/`), connections: () => connections, seen }
}

t.test('sends the request head as given and reads Content-Length, chunked and bodiless answers', async (t) => {
  const target = await httpTarget(t, {
    '/length': (_request, response) => response.writeHead(200, { 'content-length': '5' }).end('hello'),
    '/chunked': (_request, response) => {
      response.writeHead(401, { 'content-type': 'text/plain' })
      response.write('first ')
      setTimeout(() => response.end('and last'), 5)
    },
    '/empty': (_request, response) => response.writeHead(204).end(),
    '/big': (_request, response) => response.writeHead(200, { 'content-length': String(200_000) }).end(Buffer.alloc(200_000, 97)),
  })
  const connection = new Http1Connection(target.url)
  t.teardown(() => connection.close())
  const head = (path: string): string => requestHead(new URL(path, target.url), { authorization: 'Bearer x', 'x-forwarded-for': '10.0.0.1' })
  t.equal(await connection.request(head('/length')), '200')
  t.equal(await connection.request(head('/chunked')), '401', 'chunked, written in two parts')
  t.equal(await connection.request(head('/empty')), '204')
  t.equal(await connection.request(head('/big')), '200', 'a body over many reads')
  t.equal(await connection.request(head('/length')), '200')
  t.equal(target.connections(), 1, 'one keep-alive connection for all of them')
  t.equal(target.seen[0]!.method, 'GET')
  t.equal(target.seen[0]!.headers['host'], target.url.host)
  t.equal(target.seen[0]!.headers['authorization'], 'Bearer x')
  t.equal(target.seen[0]!.headers['x-forwarded-for'], '10.0.0.1')
  t.equal(requestHead(new URL('https://h:1/a?b=c'), {}), 'GET /a?b=c HTTP/1.1\r\nhost: h:1\r\n\r\n')
})

t.test('a target that closes the connection: `error`, then a new connection', async (t) => {
  const target = await httpTarget(t, {
    '/cut': (request) => request.socket.destroy(),
    '/closing': (_request, response) => response.writeHead(200, { 'content-length': '2', connection: 'close' }).end('ok'),
    '/fine': (_request, response) => response.writeHead(200, { 'content-length': '2' }).end('ok'),
  })
  const connection = new Http1Connection(target.url)
  t.teardown(() => connection.close())
  const head = (path: string): string => requestHead(new URL(path, target.url), {})
  t.equal(await connection.request(head('/cut')), 'error', 'cut before answering')
  t.equal(await connection.request(head('/fine')), '200', 'answered on a new connection')
  t.equal(await connection.request(head('/closing')), '200', 'an answer with Connection: close still counts')
  t.equal(await connection.request(head('/fine')), '200')
  t.equal(target.connections(), 3)
})

t.test('raw answers: interim 1xx skipped, answers split anywhere, unframeable ones refused', async (t) => {
  const answers: Record<string, string[]> = {
    '/interim': ['HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc'],
    '/split': ['HTTP/1.1 20', '3 OK\r\nContent-Le', 'ngth: 4\r\n\r', '\nab', 'cd'],
    '/split-chunks': ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r', '\nabc\r\n0\r\n', 'X-Trailer: 1\r\n\r\n'],
    '/unframed': ['HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the connection closes'],
  }
  const server = createTcpServer((socket: Socket) => {
    let received = ''
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1')
      const end = received.indexOf('\r\n\r\n')
      if (end === -1) return
      const path = received.split(' ')[1]!
      received = received.slice(end + 4)
      const parts = answers[path]!
      parts.forEach((part, index) => setTimeout(() => socket.write(part), index * 3))
    })
    socket.on('error', () => undefined)
  })
  const port = await listening(server, t)
  const url = new URL(`http://127.0.0.1:${port}/`)
  const connection = new Http1Connection(url)
  t.teardown(() => connection.close())
  const head = (path: string): string => requestHead(new URL(path, url), {})
  t.equal(await connection.request(head('/interim')), '200', 'the final status, after 100 Continue')
  t.equal(await connection.request(head('/split')), '203', 'status, headers and body split across reads')
  t.equal(await connection.request(head('/split-chunks')), '200', 'chunk sizes, data and trailers split across reads')
  t.equal(await connection.request(head('/unframed')), 'error', 'neither Content-Length nor chunked')
  t.equal(await connection.request(head('/interim')), '200', 'a new connection after the refused answer')
})

t.test('over TLS, with a self-signed certificate', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sak-http1-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const pems = await makeCertificate(dir)
  const server = createHttpsServer({ cert: pems.cert, key: readFileSync(pems.keyFile) }, (_request, response) => {
    response.writeHead(200, { 'content-length': '2' }).end('ok')
  })
  const port = await listening(server, t)
  t.teardown(() => server.closeAllConnections())
  const connection = new Http1Connection(new URL(`https://127.0.0.1:${port}/`))
  t.teardown(() => connection.close())
  const head = requestHead(new URL(`https://127.0.0.1:${port}/v1/agents`), {})
  t.equal(await connection.request(head), '200')
  t.equal(await connection.request(head), '200')
  t.throws(() => {
    void connection.request(head)
    void connection.request(head)
  }, /one request at a time/)
})
