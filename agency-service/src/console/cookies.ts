/**
 * The console's cookies. Every one is Secure (the console is served only
 * through the gateway's HTTPS listener; the `__Secure-` prefix makes browsers
 * refuse it otherwise), HttpOnly (no script reads it) and SameSite=Strict (no
 * other site's page can make the browser send it), and is scoped to the
 * console's prefix (or one page under it) so API requests under /v1 never carry it.
 */
import type { CookieSerializeOptions } from '@fastify/cookie'

/** The session token. No Max-Age: the browser forgets it when it closes; the server enforces its deadlines. */
export const SESSION_COOKIE = '__Secure-sak-console-session'
/** The sign-in form's own CSRF token, before any session exists (login CSRF). */
export const SIGN_IN_COOKIE = '__Secure-sak-console-sign-in'
/** A new key's encrypted plaintext, on the one page that shows it. */
export const REVEAL_COOKIE = '__Secure-sak-console-reveal'

/** Options of a console cookie scoped to `path`: the console's own (ConsolePaths.home), or one page under it. */
export function cookieOptions(path: string, maxAgeSeconds?: number): CookieSerializeOptions {
  return {
    path,
    secure: true,
    httpOnly: true,
    sameSite: 'strict',
    ...(maxAgeSeconds === undefined ? {} : { maxAge: maxAgeSeconds }),
  }
}
