/**
 * /v1/agency/webhooks: the caller's agency's webhook endpoints (list,
 * register, read, change, delete, roll the signing secret) and their
 * deliveries (one item per attempt; redeliver one). The secret, `whsec_…`,
 * is in the answer to a registration or a roll and nowhere else. Another
 * agency's endpoint or attempt, or an id that is not a UUID, is not found.
 */
import type { FastifyInstance } from 'fastify'
import { errorResponse, idSchema, itemResponse, noContentResponse, OPTIONAL_BODY, pageResponse, timestampSchema } from '@scoped/shared/api-document'
import { NO_QUERY_SCHEMA } from '@scoped/shared/backend-server'
import type { Pool } from '@scoped/shared/db'
import { ApiError, invalidField } from '@scoped/shared/errors'
import type { ListQuery } from '@scoped/shared/pagination'
import { listQuerySchema, readLimitAsNumber } from '@scoped/shared/pagination'
import { uuidOrNotFound } from '@scoped/shared/validation'
import { MAX_URL_LENGTH, urlProblem } from '../webhooks/address-policy.js'
import type { TargetPolicy } from '../webhooks/address-policy.js'
import type { WebhookEventType } from '../webhooks/event-types.js'
import { webhookEventTypes } from '../webhooks/event-types.js'
import { MAX_ENDPOINTS_PER_AGENCY, WebhookStore } from '../webhooks/webhook-store.js'

interface ById {
  Params: { id: string }
}

interface EndpointBody {
  Body: { url?: string; events?: WebhookEventType[]; enabled?: boolean }
}

const urlSchema = {
  type: 'string',
  minLength: 1,
  maxLength: MAX_URL_LENGTH,
  description:
    'Where deliveries are POSTed: an HTTPS URL whose host resolves to public addresses only (the service may be configured to allow plain HTTP and private addresses, for development).',
}
const eventsSchema = {
  type: 'array',
  items: { type: 'string', enum: webhookEventTypes },
  minItems: 1,
  maxItems: webhookEventTypes.length,
  uniqueItems: true,
  description: 'The event types this endpoint receives; an agency endpoint receives its sub-accounts’ events too.',
}
const createSchema = { type: 'object', properties: { url: urlSchema, events: eventsSchema }, required: ['url', 'events'], additionalProperties: false }
const updateSchema = {
  type: 'object',
  properties: {
    url: urlSchema,
    events: eventsSchema,
    enabled: { type: 'boolean', description: 'false: no event is queued for it and nothing is sent until it is enabled again.' },
  },
  additionalProperties: false,
}
const endpointProperties = {
  id: idSchema,
  url: { type: 'string' },
  events: { type: 'array', items: { type: 'string', enum: webhookEventTypes } },
  enabled: { type: 'boolean' },
  createdAt: timestampSchema,
}
/** The endpoint item (WebhookEndpoint): answers are serialized with it. */
const itemSchema = { type: 'object', properties: endpointProperties, required: Object.keys(endpointProperties), additionalProperties: false }
const withSecretSchema = {
  type: 'object',
  properties: { ...endpointProperties, secret: { type: 'string', pattern: '^whsec_', description: 'The Standard Webhooks signing secret, shown this once.' } },
  required: [...Object.keys(endpointProperties), 'secret'],
  additionalProperties: false,
}
const emptySchema = { type: 'object', properties: {}, additionalProperties: false } as const
const nullable = (schema: object): object => ({ anyOf: [schema, { type: 'null' }] })
const deliveryProperties = {
  id: idSchema,
  eventId: idSchema,
  type: { type: 'string' },
  attempt: { type: 'integer', minimum: 1 },
  at: timestampSchema,
  responseStatus: nullable({ type: 'integer' }),
  durationMs: nullable({ type: 'integer' }),
  error: nullable({ type: 'string' }),
  state: { type: 'string', enum: ['pending', 'delivered', 'failed'] },
}
const deliverySchema = { type: 'object', properties: deliveryProperties, required: Object.keys(deliveryProperties), additionalProperties: false }

function notFound(): ApiError {
  return new ApiError('notFound', 'Webhook endpoint not found')
}

function checkedUrl(url: string, policy: TargetPolicy): string {
  const problem = urlProblem(url, policy)
  if (problem !== undefined) throw invalidField('body.url', problem)
  return url
}

const path = '/agency/webhooks'

export async function webhookRoutes(app: FastifyInstance, options: { pool: Pool; policy: TargetPolicy }): Promise<void> {
  const store = new WebhookStore(options.pool)
  endpointRoutes(app, store, options.policy)
  secretAndDeliveryRoutes(app, store)
}

/** List, register, read, change and delete. */
function endpointRoutes(app: FastifyInstance, store: WebhookStore, policy: TargetPolicy): void {
  app.get<{ Querystring: ListQuery }>(
    path,
    { schema: { querystring: listQuerySchema, response: { 200: pageResponse(itemSchema, 'A page of webhook endpoints') } }, preValidation: readLimitAsNumber },
    async (request) => store.list(request.tenant.agencyId, request.query),
  )

  app.post<EndpointBody>(
    path,
    {
      schema: {
        querystring: NO_QUERY_SCHEMA,
        body: createSchema,
        response: {
          201: itemResponse(withSecretSchema, 'Registered; the secret is shown this once'),
          409: errorResponse(`The agency has ${MAX_ENDPOINTS_PER_AGENCY} endpoints already`),
        },
      },
    },
    async (request, reply) => {
      const { url, events } = request.body as Required<EndpointBody['Body']>
      const item = await store.create(request.tenant.agencyId, checkedUrl(url, policy), events)
      if (item === undefined) throw new ApiError('conflict', `An agency has at most ${MAX_ENDPOINTS_PER_AGENCY} webhook endpoints`)
      return reply.code(201).send({ success: true, data: item })
    },
  )

  app.get<ById>(
    `${path}/:id`,
    { schema: { querystring: NO_QUERY_SCHEMA, response: { 200: itemResponse(itemSchema, 'The webhook endpoint') } } },
    async (request) => {
      const item = await store.find(request.tenant.agencyId, uuidOrNotFound(request.params.id, notFound))
      if (item === undefined) throw notFound()
      return { success: true, data: item }
    },
  )

  app.patch<ById & EndpointBody>(
    `${path}/:id`,
    { schema: { querystring: NO_QUERY_SCHEMA, body: updateSchema, response: { 200: itemResponse(itemSchema, 'The updated webhook endpoint') } } },
    async (request) => {
      const id = uuidOrNotFound(request.params.id, notFound)
      const { url, events, enabled } = request.body
      if (url === undefined && events === undefined && enabled === undefined) throw new ApiError('badRequest', 'body must contain at least one field to change')
      const changes = {
        ...(url === undefined ? {} : { url: checkedUrl(url, policy) }),
        ...(events === undefined ? {} : { events }),
        ...(enabled === undefined ? {} : { enabled }),
      }
      const item = await store.update(request.tenant.agencyId, id, changes)
      if (item === undefined) throw notFound()
      return { success: true, data: item }
    },
  )

  app.delete<ById>(
    `${path}/:id`,
    { schema: { querystring: NO_QUERY_SCHEMA, response: { 204: noContentResponse('Deleted, with its pending deliveries') } } },
    async (request, reply) => {
      if (!(await store.delete(request.tenant.agencyId, uuidOrNotFound(request.params.id, notFound)))) throw notFound()
      return reply.code(204).send()
    },
  )
}

/** Roll the secret, list the attempts, redeliver one. */
function secretAndDeliveryRoutes(app: FastifyInstance, store: WebhookStore): void {
  app.post<ById>(
    `${path}/:id/roll-secret`,
    {
      schema: {
        querystring: NO_QUERY_SCHEMA,
        body: emptySchema,
        ...OPTIONAL_BODY,
        response: { 200: itemResponse(withSecretSchema, 'The new secret, shown this once; the old one signs nothing from now on') },
      },
    },
    async (request) => {
      const item = await store.rollSecret(request.tenant.agencyId, uuidOrNotFound(request.params.id, notFound))
      if (item === undefined) throw notFound()
      return { success: true, data: item }
    },
  )

  app.get<ById & { Querystring: ListQuery }>(
    `${path}/:id/deliveries`,
    {
      schema: { querystring: listQuerySchema, response: { 200: pageResponse(deliverySchema, 'The endpoint’s delivery attempts, newest first') } },
      preValidation: readLimitAsNumber,
    },
    async (request) => {
      const page = await store.deliveries(request.tenant.agencyId, uuidOrNotFound(request.params.id, notFound), request.query)
      if (page === undefined) throw notFound()
      return page
    },
  )

  app.post<{ Params: { id: string; deliveryId: string } }>(
    `${path}/:id/deliveries/:deliveryId/redeliver`,
    {
      schema: {
        querystring: NO_QUERY_SCHEMA,
        body: emptySchema,
        ...OPTIONAL_BODY,
        response: {
          202: {
            description: 'The event is sent again now, with the same webhook-id',
            type: 'object',
            properties: { success: { type: 'boolean', enum: [true] } },
            required: ['success'],
            additionalProperties: false,
          },
        },
      },
    },
    async (request, reply) => {
      const missing = (): ApiError => new ApiError('notFound', 'Delivery not found')
      const endpointId = uuidOrNotFound(request.params.id, notFound)
      if (!(await store.redeliver(request.tenant.agencyId, endpointId, uuidOrNotFound(request.params.deliveryId, missing)))) throw missing()
      return reply.code(202).send({ success: true })
    },
  )
}
