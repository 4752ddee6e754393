/**
 * Agency settings → API keys and sub-account settings → API keys: the same
 * routes for both, over the area (agency or sub-account) that `access`
 * resolves for the signed-in user. Every change goes through KeyService with
 * the area's owner, so a key of another tenant is "not found", and roll,
 * address changes, revoke and delete return only once every gateway replica
 * has been told.
 *
 *   GET  …/keys                    the list and the create form (name, expiry, allowed addresses)
 *   POST …/keys                    create, then redirect to the one-time display
 *
 * Every POST goes through submitOnce (form-once.ts): a repeated submission of
 * the same form is answered with the first one's result, never a second change.
 *   GET  …/keys/:keyId/created     the plaintext, once
 *   GET  …/keys/:keyId/roll        the grace presets;  POST: roll, then redirect to the new key's one-time display
 *   GET  …/keys/:keyId/addresses   the allowlist;      POST: change it, then redirect to the list
 *   GET  …/keys/:keyId/permissions the permission grid; POST: change them (key-permission-routes.ts), then back to the page with a notice
 *   GET  …/keys/:keyId/rate-limit  the key's own limit; POST: set it (action=set) or go back to the route default (action=clear)
 *   GET  …/keys/:keyId/revoke      confirmation;       POST: revoke, then redirect to the list
 *   GET  …/keys/:keyId/delete      confirmation;       POST: delete, then redirect to the list
 *
 * The list, creation and the one-time display are here; the changes of a key in key-change-routes.ts.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { isApiError } from '@scoped/shared/errors'
import type { CreatedKey } from '../keys/key-service.js'
import { agencyKeyArea, consoleHome, requireManage, subAccountKeyArea } from './access.js'
import type { ConsoleHome, KeyArea } from './access.js'
import { sessionOf } from './authenticate.js'
import { cookieOptions, REVEAL_COOKIE } from './cookies.js'
import { FORM_BODY_LIMIT, formField } from './csrf.js'
import { sendPage } from './error-page.js'
import { addressRoutes, endRoutes, rateLimitRoutes, rollRoutes } from './key-change-routes.js'
import { defaultKeyRateLimit, defaultRateLimitRoutes } from './key-default-routes.js'
import { FormRefusal } from './form-errors.js'
import type { FormOutcome } from './form-once.js'
import { submitOnce } from './form-once.js'
import type { CreateFormState, ReplacedKey } from './key-form-views.js'
import { createdKeyPage, KEY_LIMIT_HINT } from './key-form-views.js'
import { CREATE_FIELDS, createInputFromForm, createInputOf } from './key-forms.js'
import { takeReveal } from './one-time-display.js'
import type { AreaResolver, KeyParams, KeyRouteContext, KeyRoutesOptions, TenantParams } from './key-route-context.js'
import { consoleActor, keyIdOf, keyRouteContext, noticeOf, routeLimitsOf, staleKey, takeKeyNotice } from './key-route-context.js'
import type { AreaLink } from './key-views.js'
import { keysPage } from './key-views.js'
import { gridStateFromForm, UNRESTRICTED_GRID, withGridPermissions } from './permission-grid.js'
import { permissionRoutes, resourcesOf } from './key-permission-routes.js'
import type { ConsolePaths } from './paths.js'
import { consoleRoutes } from './paths.js'

export type { KeyRoutesOptions } from './key-route-context.js'

const areaKinds: ReadonlyArray<{ path: string; resolve: AreaResolver }> = [
  { path: consoleRoutes.agencyKeys, resolve: agencyKeyArea },
  { path: consoleRoutes.subAccountKeys, resolve: subAccountKeyArea },
]

export async function keyRoutes(app: FastifyInstance, options: KeyRoutesOptions): Promise<void> {
  for (const kind of areaKinds) {
    const context = keyRouteContext(app, options, kind.path, kind.resolve)
    listRoutes(context)
    createdKeyRoute(context)
    rollRoutes(context)
    addressRoutes(context)
    permissionRoutes(context)
    rateLimitRoutes(context)
    endRoutes(context)
    if (kind.path === consoleRoutes.subAccountKeys) defaultRateLimitRoutes(context)
  }
}

/** The list with the create form, and creating a key from it. */
function listRoutes(context: KeyRouteContext): void {
  const { app, path, keys, paths, pool, areaOf } = context

  app.get<{ Params: TenantParams }>(path, async (request, reply) => {
    const area = await areaOf(request)
    const list = await keys.list(area.owner)
    const defaultRateLimit = area.subAccount === null ? undefined : await defaultKeyRateLimit(context, area)
    const notice = await takeKeyNotice(pool, request, area)
    const showAll = (request.query as Record<string, unknown> | undefined)?.['show'] === 'all'
    const areas = areaLinks(paths, area, await consoleHome(pool, sessionOf(request).userId))
    const view = {
      paths,
      session: sessionOf(request),
      area,
      keys: list,
      now: new Date(keys.now()),
      showAll,
      notice,
      areas,
      permissionResources: resourcesOf(context, area),
      routeLimits: routeLimitsOf(context, area),
    }
    return sendPage(reply, 200, keysPage(defaultRateLimit === undefined ? view : { ...view, defaultRateLimit }))
  })

  app.post<{ Params: TenantParams }>(path, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    const area = await areaOf(request)
    requireManage(area)
    const form: CreateFormState = {
      name: formField(request, 'name') ?? '',
      expires: formField(request, 'expires') ?? 'never',
      expiresOn: formField(request, 'expiresOn') ?? '',
      allowedCidrs: formField(request, 'allowedCidrs') ?? '',
      permissions: gridStateFromForm(request, resourcesOf(context, area)),
    }
    return submitOnce(context, request, reply, async () => {
      let created: CreatedKey
      try {
        const input = withGridPermissions(() => createInputFromForm(form, keys.now()), form.permissions ?? UNRESTRICTED_GRID, resourcesOf(context, area))
        created = await keys.create(area.owner, input.name, consoleActor(request), {
          expiresAt: input.expiresAt,
          allowedCidrs: input.allowedCidrs,
          permissions: input.permissions,
          fields: CREATE_FIELDS,
        })
      } catch (error) {
        return refuseCreation(context, request, area, form, error)
      }
      request.log.info({ keyId: created.id, scope: created.scope }, 'console: key created')
      if (created.unconfirmed !== undefined) request.log.warn({ keyId: created.id }, created.unconfirmed)
      return context.reveal(area, created, created.unconfirmed !== undefined)
    })
  })
}

/** The agency's key settings and those of its sub-accounts the user sees, for the switcher. */
function areaLinks(paths: ConsolePaths, area: KeyArea, home: ConsoleHome): AreaLink[] {
  const agency = home.agencies.find((candidate) => candidate.id === area.agency.id)
  if (agency === undefined) return []
  const current = area.subAccount?.id
  return [
    { label: `${agency.name} (agency keys)`, href: paths.agencyKeys(agency.id), current: current === undefined },
    ...agency.subAccounts.map((sub) => ({ label: sub.name, href: paths.subAccountKeys(sub.id), current: sub.id === current })),
  ]
}

/** The list again, with the form as it was sent and every problem on the field it is about; anything else is thrown on. */
async function refuseCreation(context: KeyRouteContext, request: FastifyRequest, area: KeyArea, form: CreateFormState, error: unknown): Promise<FormOutcome> {
  const field = createInputOf(error)
  if (field === undefined) throw error
  const limit = isApiError(error) && error.code === 'keyLimitReached'
  const errors =
    error instanceof FormRefusal ? error.errors : [{ field, message: limit ? `${(error as Error).message}. ${KEY_LIMIT_HINT}` : (error as Error).message }]
  const list = await context.keys.list(area.owner)
  const status = isApiError(error) ? error.statusCode : 400
  const body = keysPage({
    paths: context.paths,
    session: sessionOf(request),
    area,
    keys: list,
    now: new Date(context.keys.now()),
    form: { ...form, errors },
    permissionResources: resourcesOf(context, area),
    routeLimits: routeLimitsOf(context, area),
  })
  return { kind: 'page', status, body }
}

/** The plaintext of a new key, once (then 410), and for a roll what became of the key it replaced. */
function createdKeyRoute(context: KeyRouteContext): void {
  const { app, path, keys, paths, pool, now, areaOf } = context
  app.get<{ Params: KeyParams }>(`${path}/:keyId/created`, async (request, reply) => {
    const session = sessionOf(request)
    const area = await areaOf(request)
    const keyId = keyIdOf(request.params)
    const key = await keys.find(keyId, area.owner)
    if (key === undefined) throw staleKey(area)
    const plaintext = await takeReveal(pool, 'key', session.tokenHash, keyId, request.cookies[REVEAL_COOKIE], now())
    reply.clearCookie(REVEAL_COOKIE, cookieOptions(`${area.keysPath}/${keyId}/created`))
    let replaced: ReplacedKey | undefined
    if (key.replaces !== null) {
      const old = await keys.find(key.replaces, area.owner)
      if (old !== undefined) replaced = { name: old.name, hint: old.hint, expiresAt: old.expiresAt, ended: old.status !== 'active' }
    }
    if (replaced !== undefined) replaced.unconfirmed = noticeOf(request.query).unconfirmed
    return sendPage(reply, plaintext === undefined ? 410 : 200, createdKeyPage(paths, session, area, key, plaintext, replaced))
  })
}
