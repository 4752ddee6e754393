/**
 * Cross-site request forgery defences for every state-changing console
 * request, in two independent layers:
 *
 * 1. Where the request came from, as the browser reports it. `Sec-Fetch-Site`
 *    (sent by every current browser, and never settable by a page) must be
 *    `same-origin`; it is decisive, because behind the gateway `host` names
 *    the backend, not the origin the browser saw. A browser without Fetch
 *    Metadata is judged by `Origin` instead, which must name `host` or
 *    `x-forwarded-host` (a proxy that rewrites `host` can pass the original
 *    there; a forged cross-site form cannot set it). A client that sends
 *    neither header is not a browser, and a forged request needs a browser.
 * 2. A secret token in a hidden form field that must equal the session's (or,
 *    before sign-in, the sign-in cookie's), compared in constant time.
 *
 * Only urlencoded bodies are accepted, so no other parser can supply the token.
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import type { FastifyRequest } from 'fastify'

export type CsrfVerdict = 'ok' | 'cross-site' | 'bad-token' | 'bad-content-type'

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name]
  return typeof value === 'string' ? value : undefined
}

/** The hosts (with port) this request may legitimately come from. */
function requestHosts(request: FastifyRequest): string[] {
  const hosts: string[] = []
  const host = header(request, 'host')
  if (host !== undefined) hosts.push(host)
  const forwarded = header(request, 'x-forwarded-host')?.split(',')[0]?.trim()
  if (forwarded) hosts.push(forwarded)
  return hosts
}

export function isSameOrigin(request: FastifyRequest): boolean {
  const site = header(request, 'sec-fetch-site')
  if (site !== undefined) return site === 'same-origin'
  const origin = header(request, 'origin')
  if (origin === undefined) return true
  let url: URL
  try {
    url = new URL(origin)
  } catch {
    // Includes `Origin: null` (sandboxed frames, some redirects): never trusted.
    return false
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return false
  // Compared as URLs of the origin's scheme, so `host:443` and `host` are the same https host.
  return requestHosts(request).some((host) => sameHost(url, host))
}

function sameHost(origin: URL, host: string): boolean {
  try {
    return new URL(`${origin.protocol}//${host}`).host === origin.host
  } catch {
    return false
  }
}

/** Constant-time equality of two secrets of any length (both are hashed to a fixed length first). */
export function tokensEqual(presented: unknown, expected: string): boolean {
  if (typeof presented !== 'string' || presented.length === 0 || expected.length === 0) return false
  const a = createHash('sha256').update(presented).digest()
  const b = createHash('sha256').update(expected).digest()
  return timingSafeEqual(a, b)
}

export function isFormPost(request: FastifyRequest): boolean {
  const type = header(request, 'content-type')?.split(';')[0]?.trim().toLowerCase()
  return type === 'application/x-www-form-urlencoded'
}

/** A string field of a parsed form body; a repeated or missing field is undefined. */
export function formField(request: FastifyRequest, name: string): string | undefined {
  const body = request.body
  if (typeof body !== 'object' || body === null) return undefined
  const value = (body as Record<string, unknown>)[name]
  return typeof value === 'string' ? value : undefined
}

export const CSRF_FIELD = 'csrf'

/** The largest form body a console route accepts (its parser's limit, and every POST route's). */
export const FORM_BODY_LIMIT = 8 * 1024

export function checkCsrf(request: FastifyRequest, expectedToken: string | undefined): CsrfVerdict {
  if (!isFormPost(request)) return 'bad-content-type'
  if (!isSameOrigin(request)) return 'cross-site'
  if (expectedToken === undefined || !tokensEqual(formField(request, CSRF_FIELD), expectedToken)) return 'bad-token'
  return 'ok'
}
