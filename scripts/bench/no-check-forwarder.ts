/**
 * A reference row: the gateway's transport with none of its checks. Fastify
 * over HTTPS with the same certificate; the route hijacks the reply and
 * forwards on the gateway's own upstream connections (gateway/src/upstream.ts)
 * with a handler that writes the backend's status, headers and body chunks
 * straight to the caller (as the gateway's relay.ts does). No key, path rules, signing, log line or
 * metrics: the distance from this row to the gateway is what the checks
 * cost; from the bare proxy to this row, what the transport saves.
 */
import { readFileSync } from 'node:fs'
import type { ServerResponse } from 'node:http'
import Fastify from 'fastify'
import type { Client } from 'undici'
import type { BackendShare, UpstreamExchange } from '@scoped/gateway/upstream'
import { Upstreams } from '@scoped/gateway/upstream'

const [port, upstreamPort, certFile, keyFile] = process.argv.slice(2)
const app = Fastify({ logger: false, https: { cert: readFileSync(certFile!), key: readFileSync(keyFile!) } })
const origin = `http://127.0.0.1:${upstreamPort}`
// The gateway's defaults: 64 connections, 256 requests waiting, a 30 s deadline.
const upstream = new Upstreams({ connections: 64, queue: 256, timeoutMs: 30_000 })

class Relay implements UpstreamExchange {
  connection: Client | null = null
  constructor(
    private readonly response: ServerResponse,
    private readonly backend: BackendShare,
  ) {}
  // undici tells the new handler interface from the legacy one by this method.
  onRequestStart(): void {}
  onResponseStart(_controller: unknown, statusCode: number, headers: Record<string, string | string[] | undefined>): void {
    this.response.writeHead(statusCode, headers as Record<string, string | string[]>)
  }
  onResponseData(_controller: unknown, chunk: Buffer): void {
    this.response.write(chunk)
  }
  onResponseEnd(): void {
    this.response.end()
    upstream.release(this.backend, this)
  }
  onResponseError(_controller: unknown, error: Error): void {
    this.response.destroy(error)
    upstream.release(this.backend, this)
  }
}

app.get('/*', (request, reply) => {
  reply.hijack()
  // One tenant, as the benchmark's one key is to the gateway: the same share of the connections.
  const backend = upstream.acquire(origin, 'bench')
  if (typeof backend === 'string') {
    reply.raw.writeHead(503).end()
    return
  }
  backend.dispatch({ method: 'GET', path: request.url, headers: { 'x-request-id': String(request.id) }, body: null }, new Relay(reply.raw, backend))
})
await app.listen({ port: Number(port), host: '127.0.0.1' })
process.stdout.write('no-check forwarder ready\n')
process.on('SIGTERM', () => void Promise.all([app.close(), upstream.close()]).then(() => process.exit(0)))
