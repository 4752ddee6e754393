/**
 * Errors inside the console are pages, not JSON: the reader is a person in a
 * browser. One handler turns every thrown error into a page with the right
 * status; unexpected ones are logged and described to nobody.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { errorCatalog, isApiError } from '@scoped/shared/errors'
import { InvalidationError } from '@scoped/shared/key-invalidation'
import type { ConsoleSession } from './sessions.js'
import { html } from './html.js'
import { page } from './layout.js'

export function sendPage(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(body)
}

export function sendErrorPage(reply: FastifyReply, status: number, message: string, session?: ConsoleSession): FastifyReply {
  const title = status === 404 ? 'Not found' : status === 403 ? 'Not allowed' : status === 429 ? 'Too many requests' : status >= 500 ? 'Something went wrong' : 'Request refused'
  return sendPage(
    reply,
    status,
    page({
      title,
      session,
      body: html`<h1>${title}</h1>
<div class="alert" role="alert"><p>${message}</p></div>
<p><a href="/console">Back to the console</a></p>`,
    }),
  )
}

export const CSRF_REFUSED_MESSAGE = 'This form could not be accepted: it has expired or did not come from this site. Go back, reload the page and try again.'

export const INVALIDATION_FAILED_MESSAGE =
  'The change was saved, but the gateways could not all be told about it, so the key may still be accepted for a while. Try again, and check the health of Redis and the gateways.'

export function consoleErrorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const session = request.consoleSession ?? undefined
  if (isApiError(error)) return sendErrorPage(reply, error.statusCode, error.message, session)
  if (error instanceof InvalidationError) {
    request.log.error({ err: error }, 'console: key change saved but gateway caches not invalidated')
    return sendErrorPage(reply, 503, INVALIDATION_FAILED_MESSAGE, session)
  }
  const status = error.statusCode ?? 500
  if (status >= 400 && status < 500) {
    const message = status === 413 ? errorCatalog.payloadTooLarge.message : status === 415 ? errorCatalog.unsupportedMediaType.message : errorCatalog.badRequest.message
    return sendErrorPage(reply, status, message, session)
  }
  request.log.error({ err: error }, 'console: unhandled error')
  return sendErrorPage(reply, 500, errorCatalog.internal.message, session)
}
