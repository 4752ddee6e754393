/**
 * The two hooks in front of every signed-in console route: the session
 * (from the cookie, looked up by its hash) and, on every POST, the CSRF
 * checks. Deciding happens here; the routes only read `request.consoleSession`.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Pool } from '@scoped/shared/db'
import { errorCatalog } from '@scoped/shared/errors'
import { SESSION_COOKIE } from './cookies.js'
import { checkCsrf } from './csrf.js'
import { CSRF_REFUSED_MESSAGE, sendErrorPage } from './error-page.js'
import type { ConsolePaths } from './paths.js'
import type { ConsoleSession } from './sessions.js'
import { findSession } from './sessions.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The signed-in console user's session; set on the console's signed-in routes only. */
    consoleSession: ConsoleSession | null
  }
}

/** The session of a route behind `sessionHook`; throws if a route forgot the hook, never a default. */
export function sessionOf(request: FastifyRequest): ConsoleSession {
  const session = request.consoleSession
  if (session === null) throw new Error('console route used without a session')
  return session
}

export function sessionHook(pool: Pool, now: () => Date, paths: ConsolePaths) {
  return async function requireSession(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    const session = await findSession(pool, request.cookies[SESSION_COOKIE], now())
    // Nothing is done for a request without a live session: unknown, expired, idle too long, or of a
    // disabled user (disabling deletes the sessions; findSession refusing them is the second line).
    if (session === undefined) return reply.redirect(paths.signIn, 303)
    request.consoleSession = session
    return undefined
  }
}

export function csrfHook(paths: ConsolePaths) {
  return async function requireCsrf(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    if (request.method !== 'POST') return undefined
    const session = sessionOf(request)
    const verdict = checkCsrf(request, session.csrfToken)
    if (verdict === 'ok') return undefined
    request.log.warn({ reason: verdict }, 'console: state-changing request refused')
    if (verdict === 'bad-content-type') {
      return sendErrorPage(reply, paths, errorCatalog.unsupportedMediaType.status, errorCatalog.unsupportedMediaType.message, session)
    }
    return sendErrorPage(reply, paths, 403, CSRF_REFUSED_MESSAGE, session)
  }
}
