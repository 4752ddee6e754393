/**
 * The one-time form token every console form that creates or changes
 * something carries (a hidden field, fresh each time the form is drawn). It
 * names one submission: a repeated post of the same token is answered with
 * the first one's result (form-once.ts). It is not a credential (the CSRF
 * token is); for a new key or invitation it is also what the sealed plaintext
 * or link is opened with (one-time-display.ts), so it is 32 random bytes and
 * only its hash is stored.
 */
import type { FastifyRequest } from 'fastify'
import { ApiError } from '@scoped/shared/errors'
import { formField } from './csrf.js'
import type { SafeHtml } from './html.js'
import { html } from './html.js'
import { isWellFormedToken, newToken } from './sessions.js'

export const FORM_TOKEN_FIELD = 'formToken'

export const STALE_FORM_MESSAGE = 'This form is out of date. Reload the page and try again.'

/** The hidden field of a fresh form token. */
export function formTokenInput(): SafeHtml {
  return html`<input type="hidden" name="${FORM_TOKEN_FIELD}" value="${newToken()}">`
}

/** The token the form was posted with; a form without one (drawn before this existed, or forged) is refused. */
export function formTokenOf(request: FastifyRequest): string {
  const token = formField(request, FORM_TOKEN_FIELD)
  if (!isWellFormedToken(token)) throw new ApiError('badRequest', STALE_FORM_MESSAGE)
  return token
}
