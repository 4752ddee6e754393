/**
 * The signed-in user's own password (every user, whatever their role):
 *
 *   GET  <prefix>/account/password   the form
 *   POST <prefix>/account/password   change it, then redirect back with a notice
 *
 * The current password is required, so a session left open on someone
 * else's screen cannot take the account over; wrong guesses count against
 * the same allowances as failed sign-ins (per client address and per (email,
 * client address), sign-in-throttle.ts), so the form is no way around them.
 * The new password meets the rules of `ctl user create` (length, the
 * common-password list), checked before the current one, so a refusal of it
 * says nothing about the current one. Every session of the user ends, this
 * one included: the browser gets a new session token with the change, so a
 * token copied before it is worth nothing. The form is sent once
 * (form-once.ts): a second post of it waits for the first, whose change ends
 * the session both came with, and is then sent to sign in like any request
 * of an ended session; it is never checked again against the new password,
 * which would count a "wrong current password" against the user.
 */
import type { FastifyInstance } from 'fastify'
import type { Pool, PoolClient } from '@scoped/shared/db'
import { passwordProblem, PasswordHashBusy } from '@scoped/shared/passwords'
import { userActor } from '../audit/actor.js'
import { UserService } from '../users/user-service.js'
import { sessionOf } from './authenticate.js'
import { cookieOptions, SESSION_COOKIE } from './cookies.js'
import { FORM_BODY_LIMIT, formField } from './csrf.js'
import { sendPage } from './error-page.js'
import type { FormOutcome } from './form-once.js'
import { submitOnce } from './form-once.js'
import type { ConsolePaths } from './paths.js'
import { consoleRoutes } from './paths.js'
import type { PasswordField } from './password-views.js'
import { passwordPage } from './password-views.js'
import { createSession } from './sessions.js'
import { SIGN_IN_BUSY_MESSAGE, SIGN_IN_THROTTLED_MESSAGE } from './sign-in.js'
import { SignInThrottle, signInSubjects } from './sign-in-throttle.js'

export const WRONG_CURRENT_PASSWORD_MESSAGE = 'The current password is incorrect.'

export async function passwordRoutes(app: FastifyInstance, options: { pool: Pool; now: () => Date; paths: ConsolePaths }): Promise<void> {
  const { pool, now, paths } = options
  const users = new UserService(pool)
  const throttle = new SignInThrottle(pool)

  app.get(consoleRoutes.accountPassword, async (request, reply) => {
    const changed = (request.query as Record<string, unknown> | undefined)?.['notice'] === 'changed'
    return sendPage(reply, 200, passwordPage(paths, sessionOf(request), { changed }))
  })

  app.post(consoleRoutes.accountPassword, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) =>
    submitOnce({ pool, now, paths }, request, reply, async (): Promise<FormOutcome> => {
      const session = sessionOf(request)
      const refused = (status: number, error: string, errorField: PasswordField): FormOutcome => ({
        kind: 'page',
        status,
        body: passwordPage(paths, session, { error, errorField }),
      })
      const current = formField(request, 'currentPassword') ?? ''
      const next = formField(request, 'newPassword') ?? ''
      if (next !== (formField(request, 'newPasswordAgain') ?? '')) return refused(400, 'The two new passwords differ.', 'newPasswordAgain')
      const problem = passwordProblem(next)
      if (problem !== undefined) return refused(400, `${problem.charAt(0).toUpperCase()}${problem.slice(1)}.`, 'newPassword')

      const attempt = await throttle.begin(signInSubjects(session.email, request.ip, undefined), now())
      if (!attempt.allowed) {
        request.log.warn({ userId: session.userId, decidedBy: attempt.decidedBy }, 'console: password change throttled')
        reply.header('retry-after', String(attempt.retryAfterSeconds))
        return refused(429, SIGN_IN_THROTTLED_MESSAGE, 'currentPassword')
      }
      let outcome
      try {
        const replacement = async (client: PoolClient): Promise<string | undefined> => (await createSession(client, session.userId, now()))?.token
        outcome = await users.changeOwnPassword(session.userId, current, next, userActor(session.userId, request.ip), replacement)
      } catch (error) {
        throttle.abandoned(attempt)
        if (!(error instanceof PasswordHashBusy)) throw error
        reply.header('retry-after', '5')
        return refused(503, SIGN_IN_BUSY_MESSAGE, 'currentPassword')
      }
      if (outcome === 'wrong-password') {
        await throttle.failed(attempt)
        request.log.info({ userId: session.userId }, 'console: password change refused, wrong current password')
        return refused(400, WRONG_CURRENT_PASSWORD_MESSAGE, 'currentPassword')
      }
      await throttle.succeeded(attempt)
      request.log.info({ userId: session.userId }, 'console: password changed')
      reply.setCookie(SESSION_COOKIE, outcome.token, cookieOptions(paths.home))
      return { kind: 'redirect', location: `${paths.accountPassword}?notice=changed` }
    }),
  )
}
