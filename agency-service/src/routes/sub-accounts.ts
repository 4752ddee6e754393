/**
 * /v1/agency/sub-accounts: list, create, read, rename and delete the
 * caller's agency's sub-accounts, and set a sub-account's default rate limit
 * for its new keys (`keyRateLimit`). Another agency's sub-account, or an id
 * that is not a UUID, is answered like one that does not exist.
 *
 * Deleting a sub-account deletes its keys with the same immediate effect as
 * deleting a key: after the transaction has committed, every gateway
 * replica drops them before the DELETE answers.
 */
import type { FastifyInstance } from 'fastify'
import { idSchema, itemResponse, noContentResponse, pageResponse, timestampSchema } from '@scoped/shared/api-document'
import { NO_QUERY_SCHEMA } from '@scoped/shared/backend-server'
import type { Pool } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import type { ListQuery } from '@scoped/shared/pagination'
import { listQuerySchema, readLimitAsNumber } from '@scoped/shared/pagination'
import { nameSchema, requireName, uuidOrNotFound } from '@scoped/shared/validation'
import { MAX_BURST, MAX_RATE } from '@scoped/shared/rate-limit'
import { keyActor } from '../audit/actor.js'
import { checkedRateLimit } from '../keys/key-input.js'
import type { KeyService, RateLimitInput } from '../keys/key-service.js'
import { KEY_RATE_LIMIT_FIELDS } from './sub-account-store.js'
import { SubAccountStore } from './sub-account-store.js'

interface ById {
  Params: { id: string }
}

interface NameBody {
  Body: { name?: string }
}

interface UpdateBody {
  Body: { name?: string; keyRateLimit?: RateLimitInput | null }
}

/** A rate limit: `rate` tokens per second, `burst` at most (the bounds of a key's own). */
const rateLimitSchema = {
  type: 'object',
  properties: { rate: { type: 'number', exclusiveMinimum: 0, maximum: MAX_RATE }, burst: { type: 'integer', minimum: 1, maximum: MAX_BURST } },
  required: ['rate', 'burst'],
  additionalProperties: false,
}
const keyRateLimitSchema = {
  description:
    'The rate limit every new key of the sub-account gets unless it is given one of its own; sub-account members cannot change it or a key’s limit. null: the route’s defaults. Existing keys keep theirs.',
  anyOf: [rateLimitSchema, { type: 'null' }],
}

const createSchema = { type: 'object', properties: { name: nameSchema }, required: ['name'], additionalProperties: false }
const updateSchema = { type: 'object', properties: { name: nameSchema, keyRateLimit: keyRateLimitSchema }, additionalProperties: false }
/** The item's schema (SubAccount): answers are serialized with it. */
const itemSchema = {
  type: 'object',
  properties: {
    id: idSchema,
    agencyId: idSchema,
    name: { type: 'string' },
    createdAt: timestampSchema,
    updatedAt: timestampSchema,
    keyRateLimit: keyRateLimitSchema,
  },
  required: ['id', 'agencyId', 'name', 'createdAt', 'updatedAt', 'keyRateLimit'],
  additionalProperties: false,
}

function notFound(): ApiError {
  return new ApiError('subAccountNotFound')
}

export async function subAccountRoutes(app: FastifyInstance, options: { pool: Pool; keys: KeyService }): Promise<void> {
  const store = new SubAccountStore(options.pool, options.keys)
  const path = '/agency/sub-accounts'

  app.get<{ Querystring: ListQuery }>(
    path,
    { schema: { querystring: listQuerySchema, response: { 200: pageResponse(itemSchema, 'A page of sub-accounts') } }, preValidation: readLimitAsNumber },
    async (request) => store.list(request.tenant.agencyId, request.query),
  )

  app.post<NameBody>(
    path,
    { schema: { querystring: NO_QUERY_SCHEMA, body: createSchema, response: { 201: itemResponse(itemSchema, 'Created') } } },
    async (request, reply) => {
      const item = await store.create(request.tenant.agencyId, requireName(request.body.name, 'body.name'), keyActor(request.tenant.keyId, request.ip))
      return reply.code(201).send({ success: true, data: item })
    },
  )

  app.get<ById>(
    `${path}/:id`,
    { schema: { querystring: NO_QUERY_SCHEMA, response: { 200: itemResponse(itemSchema, 'The sub-account') } } },
    async (request) => {
      const item = await store.find(request.tenant.agencyId, uuidOrNotFound(request.params.id, notFound))
      if (item === undefined) throw notFound()
      return { success: true, data: item }
    },
  )

  app.patch<ById & UpdateBody>(
    `${path}/:id`,
    { schema: { querystring: NO_QUERY_SCHEMA, body: updateSchema, response: { 200: itemResponse(itemSchema, 'The updated sub-account') } } },
    async (request) => {
      const id = uuidOrNotFound(request.params.id, notFound)
      const { name, keyRateLimit } = request.body
      if (name === undefined && keyRateLimit === undefined) throw new ApiError('badRequest', 'body must contain at least one field to change')
      const agencyId = request.tenant.agencyId
      // Checked before anything is saved, so a bad limit never leaves a rename behind.
      if (keyRateLimit !== undefined) checkedRateLimit(keyRateLimit, KEY_RATE_LIMIT_FIELDS)
      const actor = keyActor(request.tenant.keyId, request.ip)
      let item = name === undefined ? await store.find(agencyId, id) : await store.rename(agencyId, id, requireName(name, 'body.name'), actor)
      if (item !== undefined && keyRateLimit !== undefined) item = await store.setKeyRateLimit(agencyId, id, keyRateLimit, actor)
      if (item === undefined) throw notFound()
      return { success: true, data: item }
    },
  )

  app.delete<ById>(
    `${path}/:id`,
    { schema: { querystring: NO_QUERY_SCHEMA, response: { 204: noContentResponse('Deleted, with its agents, contacts, calls and keys') } } },
    async (request, reply) => {
      const actor = keyActor(request.tenant.keyId, request.ip)
      const pending = await store.delete(request.tenant.agencyId, uuidOrNotFound(request.params.id, notFound), actor)
      if (pending === undefined) throw notFound()
      // Committed; now every gateway replica must drop its keys before this answers (a 503 that says so otherwise).
      await options.keys.invalidate(pending, 'The sub-account was deleted')
      return reply.code(204).send()
    },
  )
}
