/**
 * Requests to a backend service as the gateway makes them: the `x-tenant-*`
 * headers signed with signTenantHeaders. Every part of the signing can be
 * changed on its own (secret, clock, the method or path that was signed), so
 * tests can forge each kind of bad request.
 */
import type { FastifyInstance } from 'fastify'
import type { Tenant } from '@scoped/shared/tenant-signature'
import { signTenantHeaders } from '@scoped/shared/tenant-signature'

interface Teardown {
  teardown(fn: () => unknown): void
}

/** Listens on a free port of 127.0.0.1 and closes at teardown; answers the base URL. */
export async function listen(t: Teardown, app: FastifyInstance): Promise<string> {
  t.teardown(() => app.close())
  await app.listen({ host: '127.0.0.1', port: 0 })
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  return `http://127.0.0.1:${address.port}`
}

export type Item = Record<string, string | null>

export interface Pagination {
  limit: number
  nextCursor: string | null
  hasMore: boolean
}

export interface Envelope {
  success?: boolean
  message?: string
  data?: Item | Item[]
  pagination?: Pagination
}

export class TestResponse {
  constructor(
    readonly status: number,
    readonly headers: Headers,
    readonly text: string,
  ) {}

  get json(): Envelope {
    return JSON.parse(this.text) as Envelope
  }

  /** `data` of a one-item answer. */
  get item(): Item {
    const data = this.json.data
    if (data === undefined || Array.isArray(data)) throw new Error(`not one item (${this.status}): ${this.text}`)
    return data
  }

  /** `data` of a list. */
  get items(): Item[] {
    const data = this.json.data
    if (!Array.isArray(data)) throw new Error(`not a list (${this.status}): ${this.text}`)
    return data
  }

  get pagination(): Pagination {
    const pagination = this.json.pagination
    if (pagination === undefined) throw new Error(`no pagination (${this.status}): ${this.text}`)
    return pagination
  }
}

export interface SigningOptions {
  secret: string
  tenant: Tenant
  /** Signing time in seconds; the current time when omitted. */
  timestamp?: number
  /** Sign another method or path than the one sent, to forge a replay onto another request. */
  signedMethod?: string
  signedPath?: string
  /** Headers set after signing (tampering with a tenant header, say). */
  override?: Record<string, string>
}

export interface RequestOptions {
  body?: unknown
  /** Sent as it is (not JSON-encoded) when set. */
  rawBody?: string
  headers?: Record<string, string>
  signing?: SigningOptions
}

export async function request(baseUrl: string, method: string, path: string, options: RequestOptions = {}): Promise<TestResponse> {
  const url = new URL(path, baseUrl)
  const headers: Record<string, string> = { ...options.headers }
  const signing = options.signing
  if (signing !== undefined) {
    const signed = signTenantHeaders(
      signing.secret,
      signing.signedMethod ?? method,
      signing.signedPath ?? `${url.pathname}${url.search}`,
      signing.tenant,
      signing.timestamp ?? Date.now() / 1000,
    )
    Object.assign(headers, signed, signing.override)
  }
  let body: string | undefined = options.rawBody
  if (body === undefined && options.body !== undefined) body = JSON.stringify(options.body)
  if (body !== undefined && headers['content-type'] === undefined) headers['content-type'] = 'application/json'
  const response = await fetch(url, { method, headers, body })
  return new TestResponse(response.status, response.headers, await response.text())
}

/** A caller that is always signed as one tenant with one secret, as the gateway would. */
export function tenantClient(baseUrl: string, secret: string, tenant: Tenant) {
  const send = (method: string, path: string, body?: unknown) => request(baseUrl, method, path, { body, signing: { secret, tenant } })
  return {
    tenant,
    get: (path: string) => send('GET', path),
    post: (path: string, body: unknown) => send('POST', path, body),
    patch: (path: string, body: unknown) => send('PATCH', path, body),
    delete: (path: string) => send('DELETE', path),
  }
}

export type TenantClient = ReturnType<typeof tenantClient>

export function subAccountTenant(agencyId: string, subAccountId: string, keyId = '00000000-0000-4000-8000-000000000001'): Tenant {
  return { scope: 'SUB-ACCOUNT', agencyId, subAccountId, keyId }
}

export function agencyTenant(agencyId: string, keyId = '00000000-0000-4000-8000-000000000002'): Tenant {
  return { scope: 'AGENCY', agencyId, subAccountId: null, keyId }
}
