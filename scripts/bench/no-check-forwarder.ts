/**
 * A reference row: the gateway's transport with none of its checks. Fastify
 * over HTTPS with the same certificate; the route hijacks the reply and
 * forwards with undici's Pool.dispatch and a handler that writes the
 * backend's status, headers and body chunks straight to the caller (as the
 * gateway's relay.ts does). No key, path rules, signing, log line or
 * metrics: the distance from this row to the gateway is what the checks
 * cost; from the bare proxy to this row, what the transport saves.
 */
import { readFileSync } from 'node:fs'
import type { ServerResponse } from 'node:http'
import Fastify from 'fastify'
import { Pool } from 'undici'
import type { Dispatcher } from 'undici'

const [port, upstreamPort, certFile, keyFile] = process.argv.slice(2)
const app = Fastify({ logger: false, https: { cert: readFileSync(certFile!), key: readFileSync(keyFile!) } })
// As many connections as the gateway's default upstream pool.
const upstream = new Pool(`http://127.0.0.1:${upstreamPort}`, { connections: 64, pipelining: 1 })

class Relay implements Dispatcher.DispatchHandler {
  constructor(private readonly response: ServerResponse) {}
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
  }
  onResponseError(_controller: unknown, error: Error): void {
    this.response.destroy(error)
  }
}

app.get('/*', (request, reply) => {
  reply.hijack()
  upstream.dispatch({ method: 'GET', path: request.url, headers: { 'x-request-id': String(request.id) }, body: null }, new Relay(reply.raw))
})
await app.listen({ port: Number(port), host: '127.0.0.1' })
process.stdout.write('no-check forwarder ready\n')
process.on('SIGTERM', () => void Promise.all([app.close(), upstream.close()]).then(() => process.exit(0)))
