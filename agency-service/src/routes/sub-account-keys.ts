/**
 * An agency's API for its sub-accounts' keys (AGENCY scope):
 *
 *   GET    /v1/agency/sub-accounts/:id/keys                 a list of key items
 *   POST   /v1/agency/sub-accounts/:id/keys                 {name, expiresAt?, allowedCidrs?, permissions?} → 201, the item plus "key"
 *   GET    /v1/agency/sub-accounts/:id/keys/:keyId          the item
 *   PATCH  /v1/agency/sub-accounts/:id/keys/:keyId          {name?, permissions?, allowedCidrs?} → 200, the item
 *   POST   /v1/agency/sub-accounts/:id/keys/:keyId/roll     {graceSeconds?} → 201, the new item plus "key"
 *   POST   /v1/agency/sub-accounts/:id/keys/:keyId/revoke   → 200, the item (status revoked)
 *   DELETE /v1/agency/sub-accounts/:id/keys/:keyId          → 204
 *
 * Only the caller's agency's own sub-accounts: another agency's sub-account
 * (or key) is answered exactly like one that does not exist (404). Every
 * change goes through KeyService, so the rules, the limit, the messages and
 * the immediate effect on every gateway replica are the console's. Agency
 * keys stay console-only (owners and admins): no API key can mint an
 * agency-level credential.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { idSchema, itemResponse, noContentResponse, OPTIONAL_BODY, pageResponse, timestampSchema } from '@scoped/shared/api-document'
import { NO_QUERY_SCHEMA } from '@scoped/shared/backend-server'
import type { Pool } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { MAX_ALLOWED_CIDRS } from '@scoped/shared/ip-address'
import { MAX_KEY_PERMISSIONS } from '@scoped/shared/permissions'
import { MAX_BURST, MAX_RATE } from '@scoped/shared/rate-limit'
import type { ListQuery } from '@scoped/shared/pagination'
import { listQuerySchema, readLimitAsNumber } from '@scoped/shared/pagination'
import { requireIsoTime, requireName, uuidOrNotFound } from '@scoped/shared/validation'
import type { Actor } from '../audit/actor.js'
import { keyActor } from '../audit/actor.js'
import type { KeyItem, KeyOwner, KeyService } from '../keys/key-service.js'
import { KEY_NAME_MAX_LENGTH, keyItem, MAX_GRACE_SECONDS } from '../keys/key-service.js'
import { SubAccountStore } from './sub-account-store.js'

interface SubAccountParams {
  Params: { id: string }
}

interface KeyParams {
  Params: { id: string; keyId: string }
}

const cidrListSchema = { type: 'array', maxItems: MAX_ALLOWED_CIDRS, items: { type: 'string', minLength: 1, maxLength: 64 } } as const

/** Names are checked by the key service against the routes file, so an unknown one is `Unknown permission: <name>`. */
const permissionListSchema = {
  type: ['array', 'null'],
  maxItems: MAX_KEY_PERMISSIONS,
  items: { type: 'string', maxLength: 100 },
  description:
    'The key’s permissions: `<resource>:read` or `<resource>:write` for a resource the routes of the key’s scope name (`calls:read`); `:write` includes `:read`. Null or absent: unrestricted, every permission of the scope.',
} as const

const createSchema = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: KEY_NAME_MAX_LENGTH },
    expiresAt: { type: ['string', 'null'], maxLength: 64 },
    allowedCidrs: cidrListSchema,
    permissions: permissionListSchema,
  },
  required: ['name'],
  additionalProperties: false,
} as const

const updateSchema = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: KEY_NAME_MAX_LENGTH },
    permissions: { ...permissionListSchema, description: 'The key’s new permissions; null: unrestricted again. Absent: unchanged.' },
    allowedCidrs: cidrListSchema,
  },
  additionalProperties: false,
} as const

const rollSchema = {
  type: 'object',
  properties: { graceSeconds: { type: 'integer', minimum: 0, maximum: MAX_GRACE_SECONDS } },
  additionalProperties: false,
} as const

const emptySchema = { type: 'object', properties: {}, additionalProperties: false } as const

const nullable = <T extends { type: string }>(schema: T) => ({ ...schema, type: [schema.type, 'null'] })

/** A key item (KeyItem): answers are serialized with it, so nothing else can leave, a plaintext or a hash least of all. */
const keyItemProperties = {
  id: idSchema,
  name: { type: 'string' },
  scope: { type: 'string', enum: ['AGENCY', 'SUB-ACCOUNT'] },
  status: { type: 'string', enum: ['active', 'revoked', 'expired'] },
  createdAt: timestampSchema,
  lastUsedAt: nullable(timestampSchema),
  lastUsedIp: { type: ['string', 'null'], description: 'The client address of the last use.' },
  revokedAt: nullable(timestampSchema),
  expiresAt: nullable({ ...timestampSchema, description: 'When the key stops working: its expiry, or the end of a roll’s grace period.' }),
  replacedBy: nullable({ ...idSchema, description: 'The key that replaced this one (a roll).' }),
  allowedCidrs: { type: 'array', items: { type: 'string' }, description: 'Client addresses the key may be used from; empty: any.' },
  permissions: {
    type: ['array', 'null'],
    items: { type: 'string' },
    description: 'The key’s permissions, sorted (`calls:read`, `contacts:write`); null: unrestricted, every permission of its scope.',
  },
}
/** Present only for a key with a rate limit of its own (set by an operator with `ctl` or in the console). */
const keyItemOptionalProperties = {
  rateLimit: {
    type: 'object',
    description:
      'The key’s own rate limit, replacing the route’s per-key limit on every route of its scope: `rate` tokens per second, `burst` at most. Absent: the route’s.',
    properties: { rate: { type: 'number', exclusiveMinimum: 0, maximum: MAX_RATE }, burst: { type: 'integer', minimum: 1, maximum: MAX_BURST } },
    required: ['rate', 'burst'],
    additionalProperties: false,
  },
}
const keyItemSchema = {
  type: 'object',
  properties: { ...keyItemProperties, ...keyItemOptionalProperties },
  required: Object.keys(keyItemProperties),
  additionalProperties: false,
}
/** The key item plus the plaintext, shown this once. */
const createdKeySchema = {
  type: 'object',
  properties: { ...keyItemProperties, ...keyItemOptionalProperties, key: { type: 'string', description: 'The plaintext key, shown this once.' } },
  required: [...Object.keys(keyItemProperties), 'key'],
  additionalProperties: false,
}

/** A POST that may come without a body (roll, revoke): validated as `{}`. */
async function bodyMayBeAbsent(request: FastifyRequest): Promise<void> {
  if (request.body === undefined || request.body === null) request.body = {}
}

function subAccountNotFound(): ApiError {
  return new ApiError('subAccountNotFound')
}

function keyNotFound(): ApiError {
  return new ApiError('keyNotFound')
}

function actorOf(request: FastifyRequest): Actor {
  return keyActor(request.tenant.keyId, request.ip)
}

/** What every route of a sub-account's keys needs: the key service and the path's sub-account and key, checked. */
interface KeyRouteContext {
  keys: KeyService
  path: string
  /** The sub-account of the path, as a key owner, when it is the caller's agency's; 404 otherwise. */
  ownerOf(request: FastifyRequest<SubAccountParams>): Promise<KeyOwner & { scope: 'SUB-ACCOUNT' }>
  keyIdOf(request: FastifyRequest<KeyParams>): string
  /** The key's item as it is now, or a 404. */
  itemOf(id: string, owner: KeyOwner): Promise<KeyItem>
}

export async function subAccountKeyRoutes(app: FastifyInstance, options: { pool: Pool; keys: KeyService }): Promise<void> {
  const { keys } = options
  const subAccounts = new SubAccountStore(options.pool, keys)
  const context: KeyRouteContext = {
    keys,
    path: '/agency/sub-accounts/:id/keys',
    async ownerOf(request) {
      const id = uuidOrNotFound(request.params.id, subAccountNotFound)
      if (!(await subAccounts.exists(request.tenant.agencyId, id))) throw subAccountNotFound()
      return { scope: 'SUB-ACCOUNT', subAccountId: id }
    },
    keyIdOf: (request) => uuidOrNotFound(request.params.keyId, keyNotFound),
    async itemOf(id, owner) {
      const item = await keys.find(id, owner)
      if (item === undefined) throw keyNotFound()
      return keyItem(item)
    },
  }
  readRoutes(app, context)
  createRoute(app, context)
  rollRoute(app, context)
  changeRoutes(app, context)
}

function readRoutes(app: FastifyInstance, { keys, path, ownerOf, keyIdOf, itemOf }: KeyRouteContext): void {
  app.get<SubAccountParams & { Querystring: ListQuery }>(
    path,
    {
      schema: { querystring: listQuerySchema, response: { 200: pageResponse(keyItemSchema, 'A page of the sub-account’s keys') } },
      preValidation: readLimitAsNumber,
    },
    async (request) => {
      const owner = await ownerOf(request)
      return keys.listPage(owner.subAccountId, request.query)
    },
  )

  app.get<KeyParams>(
    `${path}/:keyId`,
    { schema: { querystring: NO_QUERY_SCHEMA, response: { 200: itemResponse(keyItemSchema, 'The key') } } },
    async (request) => {
      const owner = await ownerOf(request)
      return { success: true, data: await itemOf(keyIdOf(request), owner) }
    },
  )
}

function createRoute(app: FastifyInstance, { keys, path, ownerOf, itemOf }: KeyRouteContext): void {
  app.post<SubAccountParams & { Body: { name: string; expiresAt?: string | null; allowedCidrs?: string[]; permissions?: string[] | null } }>(
    path,
    {
      schema: {
        querystring: NO_QUERY_SCHEMA,
        body: createSchema,
        response: { 201: itemResponse(createdKeySchema, 'Created; the plaintext is in `key`, this once') },
      },
    },
    async (request, reply) => {
      const owner = await ownerOf(request)
      const { body } = request
      const expiresAt =
        body.expiresAt === undefined || body.expiresAt === null ? null : requireIsoTime(body.expiresAt, { name: 'expiresAt', label: 'body.expiresAt' })
      const name = requireName(body.name, { name: 'name', label: 'body.name' }, KEY_NAME_MAX_LENGTH)
      const created = await keys.create(owner, name, actorOf(request), {
        expiresAt,
        allowedCidrs: body.allowedCidrs,
        permissions: body.permissions,
        fields: { expiresAt: 'body.expiresAt', allowedCidrs: 'body.allowedCidrs', permissions: 'body.permissions' },
      })
      warnUnconfirmed(request, reply, created.id, created.unconfirmed)
      return reply.code(201).send({ success: true, data: { ...(await itemOf(created.id, owner)), key: created.key } })
    },
  )
}

/**
 * A new key is answered whatever happens (its plaintext exists nowhere else); a change not every gateway replica
 * confirmed is logged and named in a Warning header.
 */
function warnUnconfirmed(request: FastifyRequest, reply: FastifyReply, keyId: string, unconfirmed: string | undefined): void {
  if (unconfirmed === undefined) return
  request.log.warn({ keyId }, unconfirmed)
  reply.header('warning', `199 - ${JSON.stringify(unconfirmed.replace(/[^\x20-\x7e]/g, '?'))}`)
}

function rollRoute(app: FastifyInstance, { keys, path, ownerOf, keyIdOf, itemOf }: KeyRouteContext): void {
  app.post<KeyParams & { Body: { graceSeconds?: number } }>(
    `${path}/:keyId/roll`,
    {
      schema: {
        querystring: NO_QUERY_SCHEMA,
        body: rollSchema,
        ...OPTIONAL_BODY,
        response: { 201: itemResponse(createdKeySchema, 'The new key; the plaintext is in `key`, this once') },
      },
      preValidation: bodyMayBeAbsent,
    },
    async (request, reply) => {
      const owner = await ownerOf(request)
      const rolled = await keys.roll(keyIdOf(request), actorOf(request), owner, { graceSeconds: request.body.graceSeconds })
      warnUnconfirmed(request, reply, rolled.replaces, rolled.unconfirmed)
      return reply.code(201).send({ success: true, data: { ...(await itemOf(rolled.id, owner)), key: rolled.key } })
    },
  )
}

/** Change the name, the permissions or the allowlist; revoke; delete. */
function changeRoutes(app: FastifyInstance, { keys, path, ownerOf, keyIdOf, itemOf }: KeyRouteContext): void {
  app.patch<KeyParams & { Body: { name?: string; permissions?: string[] | null; allowedCidrs?: string[] } }>(
    `${path}/:keyId`,
    {
      schema: {
        querystring: NO_QUERY_SCHEMA,
        body: updateSchema,
        response: { 200: itemResponse(keyItemSchema, 'The key as changed (in force on every gateway replica when this answers)') },
      },
    },
    async (request) => {
      const owner = await ownerOf(request)
      const { name, permissions, allowedCidrs } = request.body
      const fields = { allowedCidrs: 'body.allowedCidrs', permissions: 'body.permissions', name: 'body.name' }
      const updated = await keys.update(keyIdOf(request), { actor: actorOf(request), owner, name, permissions, allowedCidrs, fields })
      return { success: true, data: keyItem(updated) }
    },
  )

  app.post<KeyParams>(
    `${path}/:keyId/revoke`,
    {
      schema: {
        querystring: NO_QUERY_SCHEMA,
        body: emptySchema,
        ...OPTIONAL_BODY,
        response: { 200: itemResponse(keyItemSchema, 'The key, revoked') },
      },
      preValidation: bodyMayBeAbsent,
    },
    async (request) => {
      const owner = await ownerOf(request)
      const keyId = keyIdOf(request)
      await keys.revoke(keyId, actorOf(request), owner)
      return { success: true, data: await itemOf(keyId, owner) }
    },
  )

  app.delete<KeyParams>(
    `${path}/:keyId`,
    { schema: { querystring: NO_QUERY_SCHEMA, response: { 204: noContentResponse('Deleted, with its record') } } },
    async (request, reply) => {
      const owner = await ownerOf(request)
      await keys.delete(keyIdOf(request), actorOf(request), owner)
      return reply.code(204).send()
    },
  )
}
