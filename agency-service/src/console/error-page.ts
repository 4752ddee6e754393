/**
 * Errors inside the console are pages, not JSON: the reader is a person in a
 * browser. One handler turns every thrown error into a page with the right
 * status; unexpected ones are logged and described to nobody.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { ApiError, clientErrorCode, errorCatalog, isApiError } from '@scoped/shared/errors'
import type { ConsoleSession } from './sessions.js'
import { html } from './html.js'
import { page } from './layout.js'
import type { ConsolePaths } from './paths.js'

export function sendPage(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(body)
}

/**
 * A page about something that is gone (Back after a delete): still a 404,
 * but said kindly, with the way on (the list it belonged to).
 */
export class StalePageError extends ApiError {
  constructor(
    message: string,
    readonly wayOn: { href: string; label: string },
  ) {
    super('keyNotFound', message)
  }
}

export function sendErrorPage(
  reply: FastifyReply,
  paths: ConsolePaths,
  status: number,
  message: string,
  session?: ConsoleSession,
  wayOn?: { href: string; label: string },
): FastifyReply {
  const title =
    wayOn !== undefined
      ? 'No longer here'
      : status === 404
        ? 'Not found'
        : status === 403
          ? 'Not allowed'
          : status === 429
            ? 'Too many requests'
            : status >= 500
              ? 'Something went wrong'
              : 'Request refused'
  return sendPage(
    reply,
    status,
    page({
      paths,
      title,
      session,
      body: html`<h1>${title}</h1>
<div class="alert" role="alert"><p>${message}</p></div>
<p><a href="${wayOn?.href ?? paths.home}">${wayOn?.label ?? 'Back to the console'}</a></p>`,
    }),
  )
}

export const CSRF_REFUSED_MESSAGE = 'This form could not be accepted: it has expired or did not come from this site. Go back, reload the page and try again.'

export function consoleErrorHandler(paths: ConsolePaths) {
  return function handleConsoleError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
    const session = request.consoleSession ?? undefined
    if (error instanceof StalePageError) return sendErrorPage(reply, paths, 404, error.message, session, error.wayOn)
    if (isApiError(error)) return sendErrorPage(reply, paths, error.statusCode, error.message, session)
    const status = error.statusCode ?? 500
    // Fastify's own client errors (body too large, not a form, …): the catalog's message for the status.
    if (status >= 400 && status < 500) return sendErrorPage(reply, paths, status, errorCatalog[clientErrorCode(status)].message, session)
    request.log.error({ err: error }, 'console: unhandled error')
    return sendErrorPage(reply, paths, 500, errorCatalog.internal.message, session)
  }
}
