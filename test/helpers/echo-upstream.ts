/**
 * A test upstream for the gateway: it checks the signed tenant headers with
 * verifyTenantHeaders, as a backend does, and echoes what reached it as JSON:
 * method, url (path with query, exactly as received), headers, body, and the
 * verified tenant (null when the request carried no tenant headers at all, as
 * console requests do). A present but bad signature gets 401, as from a backend.
 *
 * Test controls, sent as request headers (the gateway forwards them):
 * `x-echo-delay-ms` waits before answering, `x-echo-status` sets the status,
 * `x-echo-reset` drops the connection without answering.
 *
 * In process: `startEchoUpstream(t, secret)`. As a process (what the gateway
 * tests run): `node --import tsx test/helpers/echo-upstream.ts` with ECHO_PORT
 * and TENANT_SIGNING_SECRET; it prints "echo upstream ready" once listening,
 * then "echo: <method> <url>" for every request that reaches it.
 */
import { createServer } from 'node:http'
import type { IncomingHttpHeaders, Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { pathToFileURL } from 'node:url'
import { errorCatalog, errorEnvelope } from '@scoped/shared/errors'
import type { Tenant } from '@scoped/shared/tenant-signature'
import { tenantHeaders, verifyTenantHeaders } from '@scoped/shared/tenant-signature'

export interface Echo {
  method: string
  url: string
  headers: IncomingHttpHeaders
  body: string
  tenant: Tenant | null
}

interface Teardown {
  teardown(fn: () => unknown): void
}

/** `onRequest` sees each request line as it arrives (the process prints them, so tests can tell what was forwarded). */
export function createEchoUpstream(secrets: readonly string[], onRequest: (line: string) => void = () => undefined): Server {
  return createServer((request, response) => {
    onRequest(`${request.method} ${request.url}`)
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      const headers = request.headers
      if (headers['x-echo-reset'] !== undefined) {
        request.socket.destroy()
        return
      }
      const method = request.method ?? ''
      const url = request.url ?? ''
      let tenant: Tenant | null = null
      if (headers[tenantHeaders.signature] !== undefined) {
        const verified = verifyTenantHeaders(headers, method, url, secrets, Date.now() / 1000)
        if (!verified.ok) {
          const body = JSON.stringify({ ...errorEnvelope(errorCatalog.invalidSignature.message), reason: verified.reason })
          response.writeHead(401, { 'content-type': 'application/json' }).end(body)
          return
        }
        tenant = verified.tenant
      }
      const echo: Echo = { method, url, headers, body: Buffer.concat(chunks).toString('utf8'), tenant }
      const status = Number(headers['x-echo-status'] ?? 200)
      const send = (): void => {
        if (response.destroyed) return
        response.writeHead(status, { 'content-type': 'application/json', 'x-upstream': 'echo' }).end(JSON.stringify(echo))
      }
      const delay = Number(headers['x-echo-delay-ms'] ?? 0)
      if (delay > 0) setTimeout(send, delay)
      else send()
    })
  })
}

export async function startEchoUpstream(t: Teardown, secret: string, port = 0): Promise<{ port: number; origin: string }> {
  const server = createEchoUpstream([secret])
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  const bound = (server.address() as AddressInfo).port
  return { port: bound, origin: `http://127.0.0.1:${bound}` }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const secret = process.env['TENANT_SIGNING_SECRET']
  if (secret === undefined) throw new Error('TENANT_SIGNING_SECRET is required')
  const server = createEchoUpstream([secret], (line) => process.stdout.write(`echo: ${line}\n`))
  server.listen(Number(process.env['ECHO_PORT'] ?? 0), '127.0.0.1', () => {
    process.stdout.write(`echo upstream ready on ${(server.address() as AddressInfo).port}\n`)
  })
  process.on('SIGTERM', () => {
    server.closeAllConnections()
    server.close(() => process.exit(0))
  })
}
