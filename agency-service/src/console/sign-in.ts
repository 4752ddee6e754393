/**
 * Signing in and out of the console.
 *
 * Sign-in: the form carries its own CSRF token (paired with a cookie, as no
 * session exists yet); failures are throttled per client address and per
 * (email, client address), or per (user, device) for a browser that signed
 * in as that user before, decided from memory first so a refused attempt
 * costs no database work (sign-in-throttle.ts, device-cookie.ts); attempts
 * wait for their password check in a short line where known devices go first
 * and strangers past a small budget are refused at once (sign-in-line.ts);
 * an unknown
 * email costs the same scrypt work as a known one, and a disabled user gets
 * the refusal of a wrong password after the same check, so neither the
 * answer nor its timing tells whether an account exists or is disabled; a
 * hash of an older cost is replaced by one at today's; and success replaces
 * any earlier session with a new one (never reusing a token the browser had
 * before) and marks the browser as a known device of the user. Every sign-in
 * is recorded in the audit trail of each of the user's agencies
 * (user.signed-in, with the client address), and the refusals of a known user
 * too, coalesced to one user.sign-in-refused event per user per minute with
 * its count (users/sign-in-refusals.ts); an unknown email has no trail to go
 * to. Sign-out deletes the session row and the cookie.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Pool } from '@scoped/shared/db'
import { inTransaction } from '@scoped/shared/db'
import { errorCatalog } from '@scoped/shared/errors'
import { hashPassword, MAX_PASSWORD_LENGTH, needsRehash, PasswordHashBusy, unmatchableHash, verifyPassword } from '@scoped/shared/passwords'
import { cookieOptions, SESSION_COOKIE, SIGN_IN_COOKIE } from './cookies.js'
import { checkCsrf, FORM_BODY_LIMIT, formField } from './csrf.js'
import { CSRF_REFUSED_MESSAGE, sendPage } from './error-page.js'
import { html } from './html.js'
import { csrfInput, page } from './layout.js'
import type { ConsolePaths } from './paths.js'
import { consoleRoutes } from './paths.js'
import { createSession, deleteSession, findSession, isWellFormedToken, newToken } from './sessions.js'
import type { Device } from './device-cookie.js'
import { DEVICE_COOKIE, DEVICE_MAX_AGE_SECONDS, deviceCookieValue, newDeviceId, readDeviceCookie } from './device-cookie.js'
import type { SignInAttempt } from './sign-in-throttle.js'
import { SignInThrottle, signInSubjects } from './sign-in-throttle.js'
import { csrfHook, sessionHook, sessionOf } from './authenticate.js'
import { userActor } from '../audit/actor.js'
import { countSignInRefusal, FLUSH_EVERY_MS, flushSignInRefusals } from '../users/sign-in-refusals.js'
import { recordUserEvent } from '../users/user-events.js'
import type { SignInPlace } from './sign-in-line.js'
import { LINE_RETRY_AFTER_SECONDS, SignInLine } from './sign-in-line.js'

const EMAIL_MAX_LENGTH = 254

interface SignInUser {
  id: string
  email: string
  password_hash: string
  disabled: boolean
}

export const SIGN_IN_FAILED_MESSAGE = 'The email or password is incorrect.'
export const SIGN_IN_THROTTLED_MESSAGE = 'Too many failed sign-in attempts. Wait a few minutes and try again.'
export const SIGN_IN_BUSY_MESSAGE = 'Too many sign-ins are being checked right now. Try again in a moment.'

interface SignInView {
  csrfToken: string
  email?: string
  error?: string
}

function signInPage(paths: ConsolePaths, view: SignInView): string {
  return page({
    paths,
    title: 'Sign in',
    body: html`<h1>Sign in</h1>
<p class="lede">Manage the API keys of your agency and its sub-accounts.</p>
${view.error !== undefined && html`<div class="alert" role="alert" id="sign-in-error"><p>${view.error}</p></div>`}
<form method="post" action="${paths.signIn}" class="panel" novalidate>
  ${csrfInput(view.csrfToken)}
  <div class="field">
    <label for="email">Email</label>
    <input type="email" id="email" name="email" autocomplete="username" required maxlength="${EMAIL_MAX_LENGTH}" value="${view.email ?? ''}"${
      view.error !== undefined ? html` aria-invalid="true" aria-describedby="sign-in-error"` : ''
    }>
  </div>
  <div class="field">
    <label for="password">Password</label>
    <input type="password" id="password" name="password" autocomplete="current-password" required maxlength="${MAX_PASSWORD_LENGTH}"${
      view.error !== undefined ? html` aria-invalid="true" aria-describedby="sign-in-error"` : ''
    }>
  </div>
  <button type="submit">Sign in</button>
</form>`,
  })
}

/** The sign-in form's token: the one in the browser's cookie when it has a valid one, so two open tabs both work. */
function signInToken(paths: ConsolePaths, request: FastifyRequest, reply: FastifyReply): string {
  const existing = request.cookies[SIGN_IN_COOKIE]
  if (isWellFormedToken(existing)) return existing
  const token = newToken()
  reply.setCookie(SIGN_IN_COOKIE, token, cookieOptions(paths.home))
  return token
}

export interface SignInOptions {
  pool: Pool
  now: () => Date
  paths: ConsolePaths
  /** The MAC secret of the device cookie (CONSOLE_DEVICE_SECRET, or derived). */
  deviceSecret: Buffer
  /** The line of password checks (one per process; a parameter so tests can size it). */
  line?: SignInLine
}

/**
 * Checked against when the email is unknown, so a refusal costs one scrypt at today's cost either way. Made of random
 * bytes, not by hashing: no password matches it, and it costs no scrypt of its own (a lazily hashed decoy made the first
 * unknown email of a process cost two).
 */
const DECOY_HASH = unmatchableHash()

interface SignInContext extends SignInOptions {
  throttle: SignInThrottle
  line: SignInLine
}

type AllowedAttempt = Extract<SignInAttempt, { allowed: true }>

/** The sign-in form as sent: the email in the one spelling the users table stores. */
interface SignInForm {
  email: string
  password: string
  csrfToken: string
}

export async function signInRoutes(app: FastifyInstance, options: SignInOptions): Promise<void> {
  const { pool, now, paths } = options
  const context: SignInContext = { ...options, throttle: new SignInThrottle(pool), line: options.line ?? new SignInLine() }
  // The minutes of refusals that have ended go to the audit trail (every replica flushes; each minute is written once).
  const flush = (): void => {
    flushSignInRefusals(pool, now()).catch((error: unknown) => app.log.warn({ err: error }, 'console: could not write refused sign-ins to the audit trail'))
  }
  const timer = setInterval(flush, FLUSH_EVERY_MS)
  timer.unref()
  app.addHook('onClose', async () => clearInterval(timer))

  app.get(consoleRoutes.signIn, async (request, reply) => {
    if ((await findSession(pool, request.cookies[SESSION_COOKIE], now())) !== undefined) return reply.redirect(paths.home, 303)
    return sendPage(reply, 200, signInPage(paths, { csrfToken: signInToken(paths, request, reply) }))
  })

  app.post(consoleRoutes.signIn, { bodyLimit: FORM_BODY_LIMIT }, (request, reply) => signIn(context, request, reply))

  // Signing out needs a live session and its CSRF token, like every other change.
  await app.register(async (signedIn) => {
    signedIn.addHook('onRequest', sessionHook(pool, now, paths))
    signedIn.addHook('preHandler', csrfHook(paths))
    signedIn.post(consoleRoutes.signOut, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
      const session = sessionOf(request)
      await deleteSession(pool, request.cookies[SESSION_COOKIE])
      request.log.info({ userId: session.userId }, 'console: signed out')
      reply.clearCookie(SESSION_COOKIE, cookieOptions(paths.home))
      return reply.redirect(paths.signIn, 303)
    })
  })
}

/** The form's CSRF check, the throttle, the password check, then a new session: each step may end the attempt with its page. */
async function signIn(context: SignInContext, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const { paths, now, deviceSecret } = context
  const form: SignInForm = {
    email: (formField(request, 'email') ?? '').trim().toLowerCase().slice(0, EMAIL_MAX_LENGTH),
    password: formField(request, 'password') ?? '',
    csrfToken: signInToken(paths, request, reply),
  }
  const { email, csrfToken } = form
  const verdict = checkCsrf(request, request.cookies[SIGN_IN_COOKIE])
  if (verdict !== 'ok') {
    request.log.warn({ reason: verdict }, 'console: sign-in form refused')
    const status = verdict === 'bad-content-type' ? errorCatalog.unsupportedMediaType.status : 403
    return sendPage(reply, status, signInPage(paths, { csrfToken, email, error: CSRF_REFUSED_MESSAGE }))
  }
  // A browser that signed in as this account before is judged on its own record, not on failures from elsewhere.
  const device = readDeviceCookie(deviceSecret, request.cookies[DEVICE_COOKIE], email, now())
  const place = context.line.enter(device === undefined ? 'stranger' : 'known-device')
  if (place === undefined) {
    request.log.warn({ knownDevice: device !== undefined }, 'console: sign-in refused, the line of password checks is full')
    const page = signInPage(paths, { csrfToken, email, error: SIGN_IN_BUSY_MESSAGE })
    return sendPage(reply.header('retry-after', String(LINE_RETRY_AFTER_SECONDS)), 429, page)
  }
  try {
    return await signInWithPlace(context, request, reply, { form, device, place })
  } finally {
    place.leave()
  }
}

/** Once its turn in the line has come: the throttle, the password check, then a new session. */
async function signInWithPlace(
  context: SignInContext,
  request: FastifyRequest,
  reply: FastifyReply,
  { form, device, place }: { form: SignInForm; device: Device | undefined; place: SignInPlace },
): Promise<FastifyReply> {
  const { paths, now, throttle } = context
  const { email, csrfToken } = form
  await place.turn
  const attempt = await throttle.begin(signInSubjects(email, request.ip, device), now())
  if (!attempt.allowed) {
    request.log.warn({ decidedBy: attempt.decidedBy, knownDevice: device !== undefined }, 'console: sign-in throttled')
    const page = signInPage(paths, { csrfToken, email, error: SIGN_IN_THROTTLED_MESSAGE })
    return sendPage(reply.header('retry-after', String(attempt.retryAfterSeconds)), 429, page)
  }
  const refuse = (known: SignInUser | undefined): Promise<FastifyReply> => refuseSignIn(context, request, reply, form, attempt, device, known)
  const checked = await checkPassword(context, attempt, form)
  if (checked === 'busy') {
    request.log.warn('console: sign-in refused, password checks busy')
    return sendPage(reply.header('retry-after', '5'), 503, signInPage(paths, { csrfToken, email, error: SIGN_IN_BUSY_MESSAGE }))
  }
  const { user, passwordOk } = checked
  if (user === undefined || !passwordOk || user.disabled) return refuse(user)
  const token = await startSession(context, request, attempt, user, form.password)
  // Disabled between the password check and the session: refused like any other disabled account.
  if (token === undefined) return refuse({ ...user, disabled: true })
  await throttle.succeeded(attempt)
  return signedIn(context, request, reply, { user, token, email, device })
}

/**
 * The user of the email and whether the password is theirs; an unknown email
 * is checked against a decoy hash, so both cost the same. 'busy' when the
 * password checks are at capacity (the attempt is then abandoned, not failed).
 */
async function checkPassword(
  { pool, throttle }: SignInContext,
  attempt: AllowedAttempt,
  { email, password }: SignInForm,
): Promise<{ user: SignInUser | undefined; passwordOk: boolean } | 'busy'> {
  try {
    const { rows } = await pool.query<SignInUser>(`SELECT id, email, password_hash, disabled_at IS NOT NULL AS disabled FROM users WHERE email = $1`, [email])
    const user = rows[0]
    // Checked for a disabled user too: the answer and its cost must not tell a disabled account from a wrong password.
    const passwordOk = password.length > 0 && password.length <= MAX_PASSWORD_LENGTH && (await verifyPassword(password, user?.password_hash ?? DECOY_HASH))
    return { user, passwordOk }
  } catch (error) {
    throttle.abandoned(attempt)
    if (!(error instanceof PasswordHashBusy)) throw error
    return 'busy'
  }
}

/** A failed sign-in: counted, recorded for a known user, and answered like every other (the same message, whatever failed). */
async function refuseSignIn(
  { pool, paths, throttle, now }: SignInContext,
  request: FastifyRequest,
  reply: FastifyReply,
  form: SignInForm,
  attempt: AllowedAttempt,
  device: Device | undefined,
  known: SignInUser | undefined,
): Promise<FastifyReply> {
  await throttle.failed(attempt)
  // Coalesced: one event per user per minute, with the count (an attacker's rate must not grow the trail).
  if (known !== undefined) await countSignInRefusal(pool, known.id, request.ip, now())
  request.log.info({ knownDevice: device !== undefined, ...(known?.disabled === true ? { userId: known.id, disabled: true } : {}) }, 'console: sign-in failed')
  return sendPage(reply, 401, signInPage(paths, { csrfToken: form.csrfToken, email: form.email, error: SIGN_IN_FAILED_MESSAGE }))
}

/** A new session in place of any earlier one, recorded; its token, or undefined when the user was disabled meanwhile. */
async function startSession(
  { pool, now, throttle }: SignInContext,
  request: FastifyRequest,
  attempt: AllowedAttempt,
  user: SignInUser,
  password: string,
): Promise<string | undefined> {
  try {
    if (needsRehash(user.password_hash)) await rehash(request, pool, user, password)
    await deleteSession(pool, request.cookies[SESSION_COOKIE])
    const created = await inTransaction(pool, async (client) => {
      const made = await createSession(client, user.id, now())
      if (made !== undefined) await recordUserEvent(client, 'user.signed-in', user, userActor(user.id, request.ip))
      return made
    })
    return created?.token
  } catch (error) {
    throttle.abandoned(attempt)
    throw error
  }
}

/** The session and device cookies, and on to the console. */
function signedIn(
  { paths, now, deviceSecret }: SignInContext,
  request: FastifyRequest,
  reply: FastifyReply,
  signed: { user: SignInUser; token: string; email: string; device: Device | undefined },
): FastifyReply {
  const { user, token, email, device } = signed
  request.log.info({ userId: user.id }, 'console: signed in')
  reply.setCookie(SESSION_COOKIE, token, cookieOptions(paths.home))
  reply.clearCookie(SIGN_IN_COOKIE, cookieOptions(paths.home))
  // This browser is now a known device of the user (the same device id when it already was one).
  const known = { userId: user.id, deviceId: device?.userId === user.id ? device.deviceId : newDeviceId() }
  reply.setCookie(DEVICE_COOKIE, deviceCookieValue(deviceSecret, known, email, now()), cookieOptions(paths.home, DEVICE_MAX_AGE_SECONDS))
  return reply.redirect(paths.home, 303)
}

/**
 * Replaces a hash made at an older, weaker cost with one at today's, now that
 * the password is known. Only if it is still the hash that was checked (a
 * password changed meanwhile wins); a failure here never fails the sign-in.
 */
async function rehash(request: FastifyRequest, pool: Pool, user: { id: string; password_hash: string }, password: string): Promise<void> {
  try {
    const stronger = await hashPassword(password)
    await inTransaction(pool, async (client) => {
      const updated = await client.query<{ id: string; email: string }>(
        `UPDATE users SET password_hash = $2 WHERE id = $1 AND password_hash = $3 RETURNING id, email`,
        [user.id, stronger, user.password_hash],
      )
      // The same password, hashed anew: user.updated, not a password change (migration 015).
      const changed = updated.rows[0]
      if (changed !== undefined) await recordUserEvent(client, 'user.updated', changed, userActor(user.id, request.ip))
    })
    request.log.info({ userId: user.id }, 'console: password hash upgraded to the current cost')
  } catch (error) {
    request.log.warn({ err: error, userId: user.id }, 'console: could not upgrade a password hash')
  }
}
