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
import type { RouteRateLimits } from '../keys/permission-catalog.js'
import type { KeyArea } from './access.js'
import { requireManage } from './access.js'
import { sessionOf } from './authenticate.js'
import { StalePageError } from './error-page.js'
import type { FormOutcome } from './form-once.js'
import { keyLabel } from './key-list.js'
import type { Notice } from './key-views.js'
import { storeNotice, takeNotice } from './notices.js'
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
      if (key === undefined) throw staleKey(area)
      return key
    },
    reveal(area, created, unconfirmed = false) {
      const revealPath = `${area.keysPath}/${created.id}/created`
      return {
        kind: 'redirect',
        location: unconfirmed ? `${revealPath}?unconfirmed=1` : revealPath,
        reveal: { kind: 'key', id: created.id, secret: created.key },
      }
    },
  }
}

/** The signed-in user as the actor of a change, with the client address the gateway derived (and signed). */
export function consoleActor(request: FastifyRequest): Actor {
  return userActor(sessionOf(request).userId, request.ip)
}

/** A key that is not (or no longer) in the area: a page that says so and leads back to the list. */
export function staleKey(area: KeyArea): StalePageError {
  return new StalePageError('This key no longer exists: it was deleted, or never belonged here. Its page is out of date.', {
    href: area.keysPath,
    label: `Back to the API keys of ${area.subAccount?.name ?? area.agency.name}`,
  })
}

/** The rate limits of the routes a key of the area reaches, from the routes file (what "the route default" is). */
export function routeLimitsOf(context: Pick<KeyRouteContext, 'keys'>, area: KeyArea): readonly RouteRateLimits[] {
  return context.keys.permissions.routeLimits[area.owner.scope]
}

export function keyIdOf(params: KeyParams): string {
  return uuidOrNotFound(params.keyId, () => new ApiError('keyNotFound'))
}

const notices: readonly Notice[] = ['revoked', 'deleted', 'addresses', 'rate-limit', 'default-rate-limit']

/** Whether the created-key page was reached with word that not every gateway replica confirmed. */
export function noticeOf(query: unknown): { unconfirmed: boolean } {
  const values = typeof query === 'object' && query !== null ? (query as Record<string, unknown>) : {}
  return { unconfirmed: values['unconfirmed'] === '1' }
}

/** The notice stored for this session and the area's key list, once (then it is gone). */
export async function takeKeyNotice(pool: Pool, request: FastifyRequest, area: KeyArea): Promise<{ notice: Notice; subject: string | null } | undefined> {
  const stored = await takeNotice(pool, sessionOf(request).tokenHash, area.keysPath)
  const notice = notices.find((known) => known === stored?.notice)
  return notice === undefined ? undefined : { notice, subject: stored?.subject ?? null }
}

/**
 * Reached only once every replica confirmed (an unconfirmed change throws a
 * 503 page instead): stores the notice naming the key, shown once by the
 * list, and answers the redirect to it. Called within submitOnce's work, so a
 * repeated submit gets the same redirect and no second notice.
 */
export async function afterChange(
  context: Pick<KeyRouteContext, 'pool' | 'now'>,
  request: FastifyRequest,
  area: KeyArea,
  notice: Notice,
  key?: Pick<KeySummary, 'name' | 'hint'>,
): Promise<FormOutcome> {
  const subject = key === undefined ? null : keyLabel(key)
  await storeNotice(context.pool, sessionOf(request).tokenHash, area.keysPath, { notice, subject }, context.now())
  return { kind: 'redirect', location: area.keysPath }
}
