/**
 * Signing in and out of the console.
 *
 * Sign-in: the form carries its own CSRF token (paired with a cookie, as no
 * session exists yet), failures are throttled per email and per client in
 * Postgres, an unknown email costs the same scrypt work as a known one, and
 * success replaces any earlier session with a new one (never reusing a token
 * the browser had before). Sign-out deletes the session row and the cookie.
 */
import { randomBytes } from 'node:crypto'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Pool } from '@scoped/shared/db'
import { hashPassword, verifyPassword } from '@scoped/shared/passwords'
import { cookieOptions, SESSION_COOKIE, SIGN_IN_COOKIE } from './cookies.js'
import { checkCsrf, formField } from './csrf.js'
import { CSRF_REFUSED_MESSAGE, sendPage } from './error-page.js'
import { html } from './html.js'
import { csrfInput, page } from './layout.js'
import { createSession, deleteSession, findSession, isWellFormedToken, newToken } from './sessions.js'
import { beginSignInAttempt, signInSucceeded } from './sign-in-throttle.js'
import { csrfHook, sessionHook, sessionOf, SIGN_IN_PATH } from './authenticate.js'

const EMAIL_MAX_LENGTH = 254
const PASSWORD_MAX_LENGTH = 1024
const FORM_BODY_LIMIT = 8 * 1024

export const SIGN_IN_FAILED_MESSAGE = 'The email or password is incorrect.'
export const SIGN_IN_THROTTLED_MESSAGE = 'Too many failed sign-in attempts. Wait 15 minutes and try again.'

interface SignInView {
  csrfToken: string
  email?: string
  error?: string
}

function signInPage(view: SignInView): string {
  return page({
    title: 'Sign in',
    body: html`<h1>Sign in</h1>
<p class="lede">Manage the API keys of your agency and its sub-accounts.</p>
${view.error !== undefined && html`<div class="alert" role="alert" id="sign-in-error"><p>${view.error}</p></div>`}
<form method="post" action="${SIGN_IN_PATH}" class="panel" novalidate>
  ${csrfInput(view.csrfToken)}
  <div class="field">
    <label for="email">Email</label>
    <input type="email" id="email" name="email" autocomplete="username" required maxlength="${EMAIL_MAX_LENGTH}" value="${view.email ?? ''}"${
      view.error !== undefined ? html` aria-invalid="true" aria-describedby="sign-in-error"` : ''
    }>
  </div>
  <div class="field">
    <label for="password">Password</label>
    <input type="password" id="password" name="password" autocomplete="current-password" required maxlength="${PASSWORD_MAX_LENGTH}"${
      view.error !== undefined ? html` aria-invalid="true" aria-describedby="sign-in-error"` : ''
    }>
  </div>
  <button type="submit">Sign in</button>
</form>`,
  })
}

/** The sign-in form's token: the one in the browser's cookie when it has a valid one, so two open tabs both work. */
function signInToken(request: FastifyRequest, reply: FastifyReply): string {
  const existing = request.cookies[SIGN_IN_COOKIE]
  if (isWellFormedToken(existing)) return existing
  const token = newToken()
  reply.setCookie(SIGN_IN_COOKIE, token, cookieOptions())
  return token
}

export interface SignInOptions {
  pool: Pool
  now: () => Date
}

export async function signInRoutes(app: FastifyInstance, options: SignInOptions): Promise<void> {
  const { pool, now } = options
  // Checked against when the email is unknown, so both cases cost one scrypt.
  const decoyHash = hashPassword(randomBytes(24).toString('base64'))
  decoyHash.catch(() => undefined)

  app.get('/sign-in', async (request, reply) => {
    if ((await findSession(pool, request.cookies[SESSION_COOKIE], now())) !== undefined) return reply.redirect('/console', 303)
    return sendPage(reply, 200, signInPage({ csrfToken: signInToken(request, reply) }))
  })

  app.post('/sign-in', { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    const rawEmail = formField(request, 'email') ?? ''
    const email = rawEmail.trim().toLowerCase().slice(0, EMAIL_MAX_LENGTH)
    const password = formField(request, 'password') ?? ''
    const csrfToken = signInToken(request, reply)

    const verdict = checkCsrf(request, request.cookies[SIGN_IN_COOKIE])
    if (verdict !== 'ok') {
      request.log.warn({ reason: verdict }, 'console: sign-in form refused')
      return sendPage(reply, verdict === 'bad-content-type' ? 415 : 403, signInPage({ csrfToken, email, error: CSRF_REFUSED_MESSAGE }))
    }

    const attempt = await beginSignInAttempt(pool, email, request.ip, now())
    if (!attempt.allowed) {
      request.log.warn('console: sign-in throttled')
      return sendPage(reply.header('retry-after', '900'), 429, signInPage({ csrfToken, email, error: SIGN_IN_THROTTLED_MESSAGE }))
    }

    const { rows } = await pool.query<{ id: string; password_hash: string }>(`SELECT id, password_hash FROM users WHERE email = $1`, [email])
    const user = rows[0]
    const passwordOk = password.length > 0 && password.length <= PASSWORD_MAX_LENGTH && (await verifyPassword(password, user?.password_hash ?? (await decoyHash)))
    if (user === undefined || !passwordOk) {
      request.log.info('console: sign-in failed')
      return sendPage(reply, 401, signInPage({ csrfToken, email, error: SIGN_IN_FAILED_MESSAGE }))
    }

    await signInSucceeded(pool, attempt)
    await deleteSession(pool, request.cookies[SESSION_COOKIE])
    const { token } = await createSession(pool, user.id, now())
    request.log.info({ userId: user.id }, 'console: signed in')
    reply.setCookie(SESSION_COOKIE, token, cookieOptions())
    reply.clearCookie(SIGN_IN_COOKIE, cookieOptions())
    return reply.redirect('/console', 303)
  })

  // Signing out needs a live session and its CSRF token, like every other change.
  await app.register(async (signedIn) => {
    signedIn.addHook('onRequest', sessionHook(pool, now))
    signedIn.addHook('preHandler', csrfHook)
    signedIn.post('/sign-out', { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
      const session = sessionOf(request)
      await deleteSession(pool, request.cookies[SESSION_COOKIE])
      request.log.info({ userId: session.userId }, 'console: signed out')
      reply.clearCookie(SESSION_COOKIE, cookieOptions())
      return reply.redirect(SIGN_IN_PATH, 303)
    })
  })
}
