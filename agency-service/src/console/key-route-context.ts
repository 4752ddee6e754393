/**
 * What every console key route shares, for one area kind (agency keys or a
 * sub-account's keys): the area of the request, the key it names, the actor,
 * the one-time display of a new key, and where a change sends the browser.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Pool } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { uuidOrNotFound } from '@scoped/shared/validation'
import type { Actor } from '../audit/actor.js'
import { userActor } from '../audit/actor.js'
import type { CreatedKey, KeyService, KeySummary } from '../keys/key-service.js'
import type { KeyArea } from './access.js'
import { requireManage } from './access.js'
import { sessionOf } from './authenticate.js'
import type { FormOutcome } from './form-once.js'
import type { Notice } from './key-views.js'
import type { ConsolePaths } from './paths.js'

export interface KeyRoutesOptions {
  pool: Pool
  keys: KeyService
  now: () => Date
  paths: ConsolePaths
}

export type TenantParams = { tenantId: string }
export type KeyParams = TenantParams & { keyId: string }

export interface KeyRouteContext extends KeyRoutesOptions {
  app: FastifyInstance
  /** The area's key list (…/keys); every other route is below it. */
  path: string
  /** The area of the request, for the signed-in user: a 403 or 404 page when it is not theirs. */
  areaOf(request: FastifyRequest<{ Params: TenantParams }>): Promise<KeyArea>
  /** A key of the area that the user may change, or a 403 / 404 page. */
  manageableKey(area: KeyArea, params: KeyParams): Promise<KeySummary>
  /** The outcome of a form that made a key: the redirect to its one-time display (form-once.ts seals the key for it). */
  reveal(area: KeyArea, created: CreatedKey, unconfirmed?: boolean): FormOutcome
}

export type AreaResolver = (pool: Pool, paths: ConsolePaths, userId: string, tenantId: string) => Promise<KeyArea>

export function keyRouteContext(app: FastifyInstance, options: KeyRoutesOptions, path: string, resolve: AreaResolver): KeyRouteContext {
  const { pool, keys, paths } = options
  return {
    ...options,
    app,
    path,
    areaOf: (request) => resolve(pool, paths, sessionOf(request).userId, request.params.tenantId),
    async manageableKey(area, params) {
      requireManage(area)
      const key = await keys.find(keyIdOf(params), area.owner)
      if (key === undefined) throw new ApiError('keyNotFound')
      return key
    },
    reveal(area, created, unconfirmed = false) {
      const revealPath = `${area.keysPath}/${created.id}/created`
      return { kind: 'redirect', location: unconfirmed ? `${revealPath}?unconfirmed=1` : revealPath, reveal: { keyId: created.id, plaintext: created.key } }
    },
  }
}

/** The signed-in user as the actor of a change, with the client address the gateway derived (and signed). */
export function consoleActor(request: FastifyRequest): Actor {
  return userActor(sessionOf(request).userId, request.ip)
}

export function keyIdOf(params: KeyParams): string {
  return uuidOrNotFound(params.keyId, () => new ApiError('keyNotFound'))
}

const notices: readonly Notice[] = ['revoked', 'deleted', 'addresses', 'rate-limit', 'default-rate-limit']

export function noticeOf(query: unknown): { notice?: Notice; unconfirmed: boolean } {
  const values = typeof query === 'object' && query !== null ? (query as Record<string, unknown>) : {}
  const notice = notices.find((known) => known === values['notice'])
  return { ...(notice === undefined ? {} : { notice }), unconfirmed: values['unconfirmed'] === '1' }
}

/** Reached only once every replica confirmed: an unconfirmed change throws a 503 page instead. */
export function afterChange(area: KeyArea, notice: Notice): FormOutcome {
  return { kind: 'redirect', location: `${area.keysPath}?notice=${notice}` }
}
