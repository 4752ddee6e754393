/**
 * A test upstream for the gateway, standing in for any backend: it checks the
 * signed tenant headers with verifyTenantHeaders as a backend does, under the
 * secrets of whichever audience the request names in `x-tenant-audience`
 * (readAudienceSecrets: derived from TENANT_SIGNING_SECRET), checks the
 * signed content-digest against the body it read, refuses a nonce it has
 * seen, and echoes what reached it as JSON: method, url (path with query,
 * exactly as received), headers, body, the verified tenant and the audience
 * it was signed for (both null when the request carried no signature, as
 * console requests do). A present but bad signature gets 401, as from a
 * backend, with the reason in the body (`reason`) so a test can tell why.
 *
 * Test controls, sent as request headers (the gateway forwards them):
 * `x-echo-delay-ms` waits before answering, `x-echo-status` sets the status,
 * `x-echo-reset` drops the connection without answering.
 *
 * Run as a process (what the gateway tests do): `node --import tsx
 * test/helpers/echo-upstream.ts` with ECHO_PORT
 * and TENANT_SIGNING_SECRET (and, if a test wants them, TENANT_SIGNING_SECRET_PREVIOUS or
 * an `<AUDIENCE>_SIGNING_SECRET`); it prints "echo upstream ready" once listening,
 * then "echo: <method> <url>" for every request that reaches it.
 */
import { createServer } from 'node:http'
import type { IncomingHttpHeaders, Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { pathToFileURL } from 'node:url'
import { timingSafeEqual } from 'node:crypto'
import type { Env } from '@scoped/shared/config'
import { errorCatalog, errorEnvelope } from '@scoped/shared/errors'
import { isAudience, readAudienceSecrets } from '@scoped/shared/secrets'
import type { Tenant } from '@scoped/shared/tenant-signature'
import { AGENCY_SERVICE_AUDIENCE, contentDigest, DEFAULT_REPLAY_WINDOW_SECONDS, tenantHeaders, verifyTenantHeaders } from '@scoped/shared/tenant-signature'
import type { TenantVerifierRefusal } from '@scoped/shared/tenant-verifier'
import { NonceMemory } from '@scoped/shared/tenant-verifier'

export interface Echo {
  method: string
  url: string
  headers: IncomingHttpHeaders
  body: string
  tenant: Tenant | null
  /** The audience the request was signed for (the backend the gateway meant it for); null when unsigned. */
  audience: string | null
}

/** A 401 of the echo: the backends' envelope, plus why. */
export interface EchoRefusal {
  success: false
  message: string
  reason: TenantVerifierRefusal
}

function sameDigest(a: string, b: string): boolean {
  const left = Buffer.from(a)
  const right = Buffer.from(b)
  return left.length === right.length && timingSafeEqual(left, right)
}

/**
 * `env` carries the signing secrets (TENANT_SIGNING_SECRET, …) as a backend
 * would read them; `onRequest` sees each request line as it arrives (the
 * process prints them, so tests can tell what was forwarded).
 */
export function createEchoUpstream(env: Env, onRequest: (line: string) => void = () => undefined): Server {
  // Fails at start, as a backend does, when the environment has no signing secret.
  readAudienceSecrets(env, AGENCY_SERVICE_AUDIENCE)
  const secretsByAudience = new Map<string, ReturnType<typeof readAudienceSecrets>>()
  const secretsOf = (audience: string): ReturnType<typeof readAudienceSecrets> => {
    let secrets = secretsByAudience.get(audience)
    if (secrets === undefined) {
      secrets = readAudienceSecrets(env, audience)
      secretsByAudience.set(audience, secrets)
    }
    return secrets
  }
  const nonces = new NonceMemory(2 * DEFAULT_REPLAY_WINDOW_SECONDS)
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
      const body = Buffer.concat(chunks)
      const refuse = (reason: TenantVerifierRefusal): void => {
        const refusal: EchoRefusal = { ...errorEnvelope(errorCatalog.invalidSignature.message), reason }
        response.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify(refusal))
      }
      let tenant: Tenant | null = null
      let audience: string | null = null
      if (headers[tenantHeaders.signature] !== undefined) {
        const named = headers[tenantHeaders.audience]
        if (named === undefined) return refuse('missing')
        if (!isAudience(named)) return refuse('malformed')
        const now = Date.now() / 1000
        // Verified as the backend the request names: the echo stands in for every one of them.
        const verified = verifyTenantHeaders(headers, { method, pathWithQuery: url, audience: named }, secretsOf(named), now)
        if (!verified.ok) return refuse(verified.reason)
        if (!nonces.remember(verified.nonce, now)) return refuse('replayed')
        if (!sameDigest(contentDigest(body), verified.contentDigest)) return refuse('body-mismatch')
        tenant = verified.tenant
        audience = named
      }
      const echo: Echo = { method, url, headers, body: body.toString('utf8'), tenant, audience }
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

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const server = createEchoUpstream(process.env, (line) => process.stdout.write(`echo: ${line}\n`))
  server.listen(Number(process.env['ECHO_PORT'] ?? 0), '127.0.0.1', () => {
    process.stdout.write(`echo upstream ready on ${(server.address() as AddressInfo).port}\n`)
  })
  process.on('SIGTERM', () => {
    server.closeAllConnections()
    server.close(() => process.exit(0))
  })
}
