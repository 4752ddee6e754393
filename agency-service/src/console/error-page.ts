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

/** The status and message the error page shows for a thrown error; `expected` is false for one to log. */
export function shownError(error: unknown): { status: number; message: string; expected: boolean } {
  if (isApiError(error)) return { status: error.statusCode, message: error.message, expected: true }
  const status = (error as Partial<FastifyError> | undefined)?.statusCode ?? 500
  // Fastify's own client errors (body too large, not a form, …): the catalog's message for the status.
  if (status >= 400 && status < 500) return { status, message: errorCatalog[clientErrorCode(status)].message, expected: true }
  return { status: 500, message: errorCatalog.internal.message, expected: false }
}

export function consoleErrorHandler(paths: ConsolePaths) {
  return function handleConsoleError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
    const session = request.consoleSession ?? undefined
    if (error instanceof StalePageError) return sendErrorPage(reply, paths, 404, error.message, session, error.wayOn)
    const shown = shownError(error)
    if (!shown.expected) request.log.error({ err: error }, 'console: unhandled error')
    return sendErrorPage(reply, paths, shown.status, shown.message, session)
  }
}
