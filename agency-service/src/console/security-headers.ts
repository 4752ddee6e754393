/**
 * Response headers on everything the console answers. The policy allows the
 * console's own stylesheet and script files and nothing else: no inline
 * script or style, no framing, forms posting only back to the console.
 * Pages are never cached (they show account data, and one shows a new key's
 * plaintext); the assets set their own revalidating cache header.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'

export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'none'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ')

const headers: Readonly<Record<string, string>> = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'permissions-policy': 'camera=(), microphone=(), geolocation=(), payment=()',
}

export async function securityHeaders(_request: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> {
  reply.headers(headers)
  if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store')
  return payload
}
