/**
 * Every error a Fastify service answers, in the spec's envelope: our own
 * ApiErrors, schema validation (naming the field), Fastify's own client
 * errors (bad JSON, body too large, wrong content type), unknown routes (404;
 * 405 with `Allow` for a known path and a method it does not take), and
 * anything unexpected as a 500 that is logged but never described to the caller.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { API_METHODS } from './http-methods.js'
import { clientErrorCode, errorCatalog, errorEnvelope, isApiError, UNAVAILABLE_RETRY_AFTER_SECONDS } from './errors.js'

function validationMessage(error: FastifyError): string {
  const first = error.validation?.[0]
  if (first === undefined) return errorCatalog.badRequest.message
  const where = error.validationContext ?? 'request'
  const field =
    first.keyword === 'required' && typeof first.params['missingProperty'] === 'string'
      ? `${first.instancePath}/${first.params['missingProperty']}`
      : first.keyword === 'additionalProperties' && typeof first.params['additionalProperty'] === 'string'
        ? `${first.instancePath}/${first.params['additionalProperty']}`
        : first.instancePath
  const name = `${where}${field.replaceAll('/', '.')}`
  if (first.keyword === 'required') return `${name} is required`
  if (first.keyword === 'additionalProperties') return `${name} is not allowed`
  return `${name} ${first.message ?? 'is invalid'}`
}

/** The methods the request's path takes; none when the path itself is unknown (404, not 405: RFC 9110 §15.5.6 asks for Allow). */
function allowedMethods(app: FastifyInstance, request: FastifyRequest): string[] {
  const path = request.url.split('?', 1)[0] ?? ''
  return API_METHODS.filter((method) => method !== request.method && app.findRoute({ method, url: path }) !== null)
}

/** The one writer of an error in the envelope; a 503 always says when to retry (a more precise Retry-After set before stays). */
export function sendError(reply: FastifyReply, status: number, message: string): FastifyReply {
  if (status === 503 && !reply.hasHeader('retry-after')) reply.header('retry-after', String(UNAVAILABLE_RETRY_AFTER_SECONDS))
  return reply.code(status).type('application/json; charset=utf-8').send(errorEnvelope(message))
}

export const errorEnvelopePlugin = fp(
  async (app: FastifyInstance) => {
    app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
      if (isApiError(error)) return sendError(reply, error.statusCode, error.message)
      if (error.validation) return sendError(reply, 400, validationMessage(error))
      const status = error.statusCode ?? 500
      if (status >= 400 && status < 500) return sendError(reply, status, errorCatalog[clientErrorCode(status, error.code)].message)
      request.log.error({ err: error }, 'unhandled error')
      return sendError(reply, 500, errorCatalog.internal.message)
    })
    app.setNotFoundHandler((request, reply) => {
      const allowed = allowedMethods(app, request)
      if (allowed.length === 0) return sendError(reply, 404, errorCatalog.notFound.message)
      return sendError(reply.header('allow', allowed.join(', ')), 405, errorCatalog.methodNotAllowed.message)
    })
  },
  { name: 'error-envelope', fastify: '5.x' },
)
