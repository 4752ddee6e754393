/**
 * Response headers on everything the console answers, set by
 * @fastify/helmet. The policy allows the console's own stylesheet and script
 * files and nothing else: no inline script or style, no framing, forms
 * posting only back to the console. Helmet's other defaults that the console
 * has never sent are off; Strict-Transport-Security is the gateway's, on
 * every response it serves.
 *
 * Two headers helmet does not make are added here: Permissions-Policy, and
 * `cache-control: no-store` on pages (they show account data, and one shows
 * a new key's plaintext); the assets set their own revalidating cache header.
 *
 * Register with `app.register` inside the console plugin, before its
 * not-found handler: it is not encapsulated, so it covers the console's
 * routes and its 404 page, and nothing outside the console.
 */
import fastifyHelmet from '@fastify/helmet'
import type { FastifyHelmetOptions } from '@fastify/helmet'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'

export const CONTENT_SECURITY_POLICY_DIRECTIVES = {
  'default-src': ["'none'"],
  'script-src': ["'self'"],
  'style-src': ["'self'"],
  'img-src': ["'self'"],
  'connect-src': ["'none'"],
  'form-action': ["'self'"],
  'base-uri': ["'none'"],
  'frame-ancestors': ["'none'"],
} as const satisfies Record<string, readonly string[]>

const PERMISSIONS_POLICY = 'camera=(), microphone=(), geolocation=(), payment=()'

const helmetOptions: FastifyHelmetOptions = {
  // Exactly the directives above: none of helmet's defaults is merged in.
  contentSecurityPolicy: { useDefaults: false, directives: CONTENT_SECURITY_POLICY_DIRECTIVES },
  xFrameOptions: { action: 'deny' },
  xContentTypeOptions: true,
  referrerPolicy: { policy: 'no-referrer' },
  crossOriginOpenerPolicy: { policy: 'same-origin' },
  crossOriginResourcePolicy: { policy: 'same-origin' },
  crossOriginEmbedderPolicy: false,
  strictTransportSecurity: false,
  originAgentCluster: false,
  xDnsPrefetchControl: false,
  xDownloadOptions: false,
  xPermittedCrossDomainPolicies: false,
  xXssProtection: false,
}

async function pageHeaders(_request: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> {
  reply.header('permissions-policy', PERMISSIONS_POLICY)
  if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store')
  return payload
}

export const securityHeaders = fp(
  async (app: FastifyInstance) => {
    await app.register(fastifyHelmet, helmetOptions)
    app.addHook('onSend', pageHeaders)
  },
  { name: 'console-security-headers', fastify: '5.x' },
)
