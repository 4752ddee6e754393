/**
 * The key-management console: server-rendered pages under /console where
 * agency owners and admins manage agency keys, and sub-account members (and
 * agency owners and admins) manage sub-account keys (create with an expiry
 * and allowed addresses, roll with a grace period, change the addresses,
 * revoke, delete) and read the audit trail; agency owners manage the
 * agency's members (remove a membership, disable an account), and every user
 * changes their own password.
 *
 * Register with `{ prefix: CONSOLE_PREFIX }`; every link, redirect and
 * cookie path is derived from the prefix it is registered with (paths.ts).
 * The plugin is encapsulated on purpose: its cookie and form parsers,
 * session and CSRF hooks, security headers and HTML error pages apply to the
 * console only, never to /v1. The gateway forwards /console (an
 * `auth: session` route) without API key or tenant headers, so the app must
 * leave these routes unsigned.
 */
import { randomBytes } from 'node:crypto'
import fastifyCookie from '@fastify/cookie'
import fastifyFormbody from '@fastify/formbody'
import type { FastifyInstance, FastifyPluginAsync } from 'fastify'
import type { Pool } from '@scoped/shared/db'
import { errorCatalog } from '@scoped/shared/errors'
import type { KeyService } from '../keys/key-service.js'
import { assetRoutes } from './assets.js'
import { auditRoutes } from './audit-routes.js'
import { usageConsoleRoutes } from './usage-routes.js'
import { csrfHook, sessionHook } from './authenticate.js'
import { FORM_BODY_LIMIT } from './csrf.js'
import { consoleErrorHandler, sendErrorPage } from './error-page.js'
import { homeRoutes } from './home.js'
import { acceptInvitationRoutes, invitationRoutes } from './invitation-routes.js'
import { keyRoutes } from './key-routes.js'
import { memberRoutes } from './member-routes.js'
import { passwordRoutes } from './password-routes.js'
import { consolePaths } from './paths.js'
import { securityHeaders } from './security-headers.js'
import { signInRoutes } from './sign-in.js'
import { webhookConsoleRoutes } from './webhook-routes.js'
import type { TargetPolicy } from '../webhooks/address-policy.js'

export interface ConsoleOptions {
  pool: Pool
  keys: KeyService
  /** The clock for sessions, sign-in throttling and one-time key display; a parameter so tests can move it. */
  now?: () => Date
  /** MAC secret of the device cookie (device-cookie.ts); one made per process when absent, so known devices are forgotten at restart. */
  deviceSecret?: Buffer
  /** Which webhook URLs may be registered (WEBHOOK_ALLOW_PRIVATE_ADDRESSES); public https:// ones only when absent. */
  webhookPolicy?: TargetPolicy
}

/** The prefix the console is registered under, and the one the gateway's `auth: session` route forwards. */
export const CONSOLE_PREFIX = '/console'

export const consolePlugin: FastifyPluginAsync<ConsoleOptions> = async (app: FastifyInstance, options: ConsoleOptions) => {
  const { pool, keys } = options
  const now = options.now ?? (() => new Date())
  const paths = consolePaths(app.prefix)

  if (!app.hasRequestDecorator('cookies')) await app.register(fastifyCookie, { hook: 'onRequest' })
  // Forms only: a JSON or any other body gets 415 before it is read, never reaching a parser.
  app.removeAllContentTypeParsers()
  await app.register(fastifyFormbody, { bodyLimit: FORM_BODY_LIMIT })
  app.decorateRequest('consoleSession', null)

  await app.register(securityHeaders)
  app.setErrorHandler(consoleErrorHandler(paths))
  app.setNotFoundHandler((request, reply) => sendErrorPage(reply, paths, 404, errorCatalog.notFound.message))

  await app.register(assetRoutes)
  await app.register(signInRoutes, { pool, now, paths, deviceSecret: options.deviceSecret ?? randomBytes(32) })
  await app.register(acceptInvitationRoutes, { pool, now, paths })
  await app.register(async (signedIn) => {
    signedIn.addHook('onRequest', sessionHook(pool, now, paths))
    signedIn.addHook('preHandler', csrfHook(paths))
    await signedIn.register(homeRoutes, { pool, paths })
    await signedIn.register(keyRoutes, { pool, keys, now, paths })
    await signedIn.register(auditRoutes, { pool, paths, now })
    await signedIn.register(usageConsoleRoutes, { pool, now, paths })
    await signedIn.register(memberRoutes, { pool, now, paths })
    await signedIn.register(invitationRoutes, { pool, paths, now })
    await signedIn.register(webhookConsoleRoutes, { pool, paths, now, policy: options.webhookPolicy ?? { allowPrivateAddresses: false } })
    await signedIn.register(passwordRoutes, { pool, now, paths })
  })
}
