/**
 * The key-management console: server-rendered pages under /console where
 * agency owners and admins manage agency keys, and sub-account members (and
 * agency owners and admins) manage sub-account keys.
 *
 * Register with `{ prefix: '/console' }`. The plugin is encapsulated on
 * purpose: its cookie and form parsers, session and CSRF hooks, security
 * headers and HTML error pages apply to the console only, never to /v1.
 * The gateway forwards /console (an `auth: session` route) without API key
 * or tenant headers, so the app must leave these routes unsigned.
 */
import fastifyCookie from '@fastify/cookie'
import fastifyFormbody from '@fastify/formbody'
import type { FastifyInstance, FastifyPluginAsync } from 'fastify'
import type { Pool } from '@scoped/shared/db'
import { errorCatalog } from '@scoped/shared/errors'
import type { KeyService } from '../keys/key-service.js'
import { assetRoutes } from './assets.js'
import { csrfHook, sessionHook } from './authenticate.js'
import { consoleErrorHandler, sendErrorPage } from './error-page.js'
import { homeRoutes } from './home.js'
import { keyRoutes } from './key-routes.js'
import { securityHeaders } from './security-headers.js'
import { signInRoutes } from './sign-in.js'

export interface ConsoleOptions {
  pool: Pool
  keys: KeyService
  /** The clock for sessions, sign-in throttling and one-time key display; a parameter so tests can move it. */
  now?: () => Date
}

/** The prefix the console is registered under, and the one the gateway's `auth: session` route forwards. */
export const CONSOLE_PREFIX = '/console'

const FORM_BODY_LIMIT = 8 * 1024

export const consolePlugin: FastifyPluginAsync<ConsoleOptions> = async (app: FastifyInstance, options: ConsoleOptions) => {
  const { pool, keys } = options
  const now = options.now ?? (() => new Date())

  if (!app.hasRequestDecorator('cookies')) await app.register(fastifyCookie, { hook: 'onRequest' })
  if (!app.hasContentTypeParser('application/x-www-form-urlencoded')) await app.register(fastifyFormbody, { bodyLimit: FORM_BODY_LIMIT })
  app.decorateRequest('consoleSession', null)

  app.addHook('onSend', securityHeaders)
  app.setErrorHandler(consoleErrorHandler)
  app.setNotFoundHandler((request, reply) => sendErrorPage(reply, 404, errorCatalog.notFound.message))

  await app.register(assetRoutes)
  await app.register(signInRoutes, { pool, now })
  await app.register(async (signedIn) => {
    signedIn.addHook('onRequest', sessionHook(pool, now))
    signedIn.addHook('preHandler', csrfHook)
    await signedIn.register(homeRoutes, { pool })
    await signedIn.register(keyRoutes, { pool, keys, now })
  })
}
