/**
 * The benchmark's backend: a bare node:http server answering every request
 * with a small list body shaped like GET /v1/agents, so the proxies in front
 * of it, not the backend, are what the benchmark measures.
 */
import { createServer } from 'node:http'

const body = JSON.stringify({
  success: true,
  data: [{ id: '00000000-0000-4000-8000-000000000001', name: 'Agent One', createdAt: '2026-01-01T00:00:00.000Z' }],
  pagination: { limit: 20, nextCursor: null, hasMore: false },
})

const server = createServer((request, response) => {
  request.resume()
  request.on('end', () => {
    response.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) })
    response.end(body)
  })
})
server.keepAliveTimeout = 65_000
server.listen(Number(process.argv[2]), '127.0.0.1', () => process.stdout.write('upstream ready\n'))
process.on('SIGTERM', () => server.close(() => process.exit(0)))
