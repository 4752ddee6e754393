/**
 * Requests to a backend service as the gateway makes them: the `x-tenant-*`
 * headers signed with signTenantHeaders, for an audience (by default the
 * backend of the tenant's scope), with a fresh nonce and the content-digest
 * of the body actually sent. Every part of the signing can be changed on its
 * own (secret, clock, audience, nonce, digest, the method or path that was
 * signed), so tests can forge each kind of bad request.
 */
import { randomBytes } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import type { SigningSecret, Tenant } from '@scoped/shared/tenant-signature'
import { contentDigest, defaultAudience, signTenantHeaders } from '@scoped/shared/tenant-signature'
import type { Teardown } from './teardown.js'

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
  /** The audience's secret, as the backend was given it (a string, or one derived by readAudienceSecrets). */
  secret: SigningSecret
  tenant: Tenant
  /** The backend it is signed for; the one of the tenant's scope (defaultAudience) when omitted. */
  audience?: string
  /** The nonce; a fresh random one when omitted. Give the same one (and timestamp) twice to replay a request. */
  nonce?: string
  /** The content-digest signed (and sent); that of the body actually sent when omitted, so another one re-bodies the request. */
  contentDigest?: string
  /** Signing time in seconds; the current time when omitted. */
  timestamp?: number
  /** Sign another method or path than the one sent, to forge a replay onto another request. */
  signedMethod?: string
  signedPath?: string
  /** Headers set after signing (tampering with a tenant header, say). */
  override?: Record<string, string>
  /** Headers removed after signing (a request missing one). */
  omit?: readonly string[]
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
  let body: string | undefined = options.rawBody
  if (body === undefined && options.body !== undefined) body = JSON.stringify(options.body)
  if (body !== undefined && headers['content-type'] === undefined) headers['content-type'] = 'application/json'
  const signing = options.signing
  if (signing !== undefined) {
    const signed = signTenantHeaders(
      signing.secret,
      {
        method: signing.signedMethod ?? method,
        pathWithQuery: signing.signedPath ?? `${url.pathname}${url.search}`,
        audience: signing.audience ?? defaultAudience(signing.tenant.scope),
        contentDigest: signing.contentDigest ?? contentDigest(body),
        nonce: signing.nonce ?? newNonce(),
      },
      signing.tenant,
      signing.timestamp ?? Date.now() / 1000,
    )
    Object.assign(headers, signed, signing.override)
    for (const name of signing.omit ?? []) delete headers[name]
  }
  const response = await fetch(url, { method, headers, body })
  return new TestResponse(response.status, response.headers, await response.text())
}

/** A nonce as the gateway makes them: unique per request. */
export function newNonce(): string {
  return randomBytes(16).toString('base64url')
}

/** A caller that is always signed as one tenant with one secret (for `audience`, by default the backend of its scope), as the gateway would. */
export function tenantClient(baseUrl: string, secret: SigningSecret, tenant: Tenant, audience?: string) {
  const send = (method: string, path: string, body?: unknown) => request(baseUrl, method, path, { body, signing: { secret, tenant, audience } })
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
