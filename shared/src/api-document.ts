/**
 * The services' part of the API description (OpenAPI 3.1). Each service app
 * registers `apiDocumentPlugin` before its routes: @fastify/swagger records
 * every route with the schemas that validate its requests and serialize its
 * responses, and `app.swagger()` answers the document. Nothing is served from
 * here: `npm run openapi` (scripts/openapi.ts) builds both apps in-process,
 * merges their documents with the gateway's route map and writes
 * deploy/openapi.json, which the gateway serves.
 *
 * Only the API under /v1 is described: health probes and the console are
 * hidden. Each operation is marked with the key scope its service requires
 * (`x-scope`), which the merge checks against the route map.
 *
 * The response schemas below are the routes' own `schema.response`: Fastify
 * serializes with them, so a field the schema does not name never leaves a
 * service.
 */
import swagger from '@fastify/swagger'
import type { FastifyInstance, FastifySchema } from 'fastify'
import fp from 'fastify-plugin'
import type { Scope } from './scope.js'

export const API_DOCUMENT_PREFIX = '/v1'

/** The extension naming the key scope an operation requires. */
export const SCOPE_EXTENSION = 'x-scope'
/** The permission a restricted key needs for an operation (`calls:read`), from the route map's `permission` and the method. */
export const PERMISSION_EXTENSION = 'x-permission'

/**
 * On a route's schema: its body may be absent (revoke, roll: validated as
 * `{}`). @fastify/swagger marks every body required; the merge reads this to
 * say otherwise, and never publishes the extension itself.
 */
export const OPTIONAL_BODY_EXTENSION = 'x-body-optional'

/** Spread into a route's schema whose body may be absent: `schema: { body, ...OPTIONAL_BODY }`. */
export const OPTIONAL_BODY = { [OPTIONAL_BODY_EXTENSION]: true } as const

export interface ApiDocumentOptions {
  /** The service, as the document's title (never published: the merge writes its own). */
  service: string
  /** The key scope every /v1 route of the service requires (requireTenantScope). */
  scope: Scope
}

function isApiPath(url: string): boolean {
  return url === API_DOCUMENT_PREFIX || url.startsWith(`${API_DOCUMENT_PREFIX}/`)
}

async function apiDocument(app: FastifyInstance, options: ApiDocumentOptions): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: options.service, version: '1' },
    },
    transform: ({ schema, url }) => {
      // Documentation only: the route's own schema (validation, serialization) is left as it is.
      if (!isApiPath(url)) return { schema: { ...schema, hide: true } as FastifySchema, url }
      // A route of another scope than the service's (agency-service's /v1/usage) names its own.
      return { schema: { [SCOPE_EXTENSION]: options.scope, ...schema } as FastifySchema, url }
    },
  })
}

/** Registers @fastify/swagger for the service's /v1 routes; register it before the routes. */
export const apiDocumentPlugin = fp(apiDocument, { name: 'api-document', fastify: '5.x' })

export const idSchema = { type: 'string', format: 'uuid' } as const
export const timestampSchema = { type: 'string', format: 'date-time' } as const

/** The error envelope every error is answered with. */
export const errorEnvelopeSchema = {
  type: 'object',
  properties: {
    success: { type: 'boolean', enum: [false] },
    message: { type: 'string' },
  },
  required: ['success', 'message'],
  additionalProperties: false,
} as const

/** `{"success":true,"data":{…}}`: one item. */
export function itemResponse(item: object, description: string): object {
  return {
    description,
    type: 'object',
    properties: { success: { type: 'boolean', enum: [true] }, data: item },
    required: ['success', 'data'],
    additionalProperties: false,
  }
}

/** `{"success":true,"data":[…],"pagination":{…}}`: one page of a list (pagination.ts). */
export function pageResponse(item: object, description: string): object {
  return {
    description,
    type: 'object',
    properties: {
      success: { type: 'boolean', enum: [true] },
      data: { type: 'array', items: item },
      pagination: {
        type: 'object',
        properties: {
          limit: { type: 'integer', minimum: 1 },
          nextCursor: { type: ['string', 'null'], description: 'Pass as `cursor` for the next page; null on the last page.' },
          hasMore: { type: 'boolean' },
        },
        required: ['limit', 'nextCursor', 'hasMore'],
        additionalProperties: false,
      },
    },
    required: ['success', 'data', 'pagination'],
    additionalProperties: false,
  }
}

/** DELETE's answer: 204 without a body. */
export function noContentResponse(description: string): object {
  return { description, type: 'null' }
}

/** An error a route itself may answer beyond the common ones (409, say), in the envelope. */
export function errorResponse(description: string): object {
  return { description, ...errorEnvelopeSchema }
}
