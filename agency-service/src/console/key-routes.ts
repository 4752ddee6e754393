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
 *   GET  …/keys/:keyId/created     the plaintext, once
 *   GET  …/keys/:keyId/roll        the grace presets;  POST: roll, then redirect to the new key's one-time display
 *   GET  …/keys/:keyId/addresses   the allowlist;      POST: change it, then redirect to the list
 *   GET  …/keys/:keyId/rate-limit  the key's own limit; POST: set it (action=set) or go back to the route default (action=clear)
 *   GET  …/keys/:keyId/revoke      confirmation;       POST: revoke, then redirect to the list
 *   GET  …/keys/:keyId/delete      confirmation;       POST: delete, then redirect to the list
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Pool } from '@scoped/shared/db'
import { ApiError, isApiError } from '@scoped/shared/errors'
import { MAX_ALLOWED_CIDRS, parseCidr } from '@scoped/shared/ip-address'
import { parseDecimal } from '@scoped/shared/rate-limit'
import { requireIsoTime, uuidOrNotFound } from '@scoped/shared/validation'
import type { Actor } from '../audit/actor.js'
import { userActor } from '../audit/actor.js'
import type { CreatedKey, KeyService, KeySummary } from '../keys/key-service.js'
import type { KeyArea } from './access.js'
import { agencyKeyArea, requireManage, requireRateLimitSetter, subAccountKeyArea } from './access.js'
import { sessionOf } from './authenticate.js'
import { cookieOptions, REVEAL_COOKIE } from './cookies.js'
import { FORM_BODY_LIMIT, formField } from './csrf.js'
import { sendPage } from './error-page.js'
import { REVEAL_LIFETIME_MS, storeReveal, takeReveal } from './key-reveal.js'
import type { CreateField, CreateFormState, KeyAction, Notice, RateLimitFormState, ReplacedKey } from './key-views.js'
import { addressesPage, confirmPage, createdKeyPage, EXPIRY_PRESETS, GRACE_PRESETS, KEY_LIMIT_HINT, keysPage, rateLimitPage, rollPage } from './key-views.js'
import type { ConsolePaths } from './paths.js'
import { consoleRoutes } from './paths.js'

export interface KeyRoutesOptions {
  pool: Pool
  keys: KeyService
  now: () => Date
  paths: ConsolePaths
}

interface AreaKind {
  path: string
  resolve: (pool: Pool, paths: ConsolePaths, userId: string, tenantId: string) => Promise<KeyArea>
}

const areaKinds: readonly AreaKind[] = [
  { path: consoleRoutes.agencyKeys, resolve: agencyKeyArea },
  { path: consoleRoutes.subAccountKeys, resolve: subAccountKeyArea },
]

type TenantParams = { tenantId: string }
type KeyParams = TenantParams & { keyId: string }

/** The signed-in user as the actor of a change, with the client address the gateway derived (x-forwarded-for). */
function consoleActor(request: FastifyRequest): Actor {
  return userActor(sessionOf(request).userId, request.ip)
}

function keyIdOf(params: KeyParams): string {
  return uuidOrNotFound(params.keyId, () => new ApiError('keyNotFound'))
}

const notices: readonly Notice[] = ['revoked', 'deleted', 'addresses', 'rate-limit']

function noticeOf(query: unknown): { notice?: Notice; unconfirmed: boolean } {
  const values = typeof query === 'object' && query !== null ? (query as Record<string, unknown>) : {}
  const notice = notices.find((known) => known === values['notice'])
  return { ...(notice === undefined ? {} : { notice }), unconfirmed: values['unconfirmed'] === '1' }
}

/** Reached only once every replica confirmed: an unconfirmed change throws a 503 page instead. */
function afterChange(area: KeyArea, notice: Notice): string {
  return `${area.keysPath}?notice=${notice}`
}

/** A refusal of one field of a form, shown beside it. */
class FormFieldError extends Error {
  constructor(
    readonly field: CreateField,
    message: string,
  ) {
    super(message)
  }
}

/** The allowlist typed into a form: entries separated by new lines, commas or spaces, each checked, in their one spelling. */
export function cidrsFromForm(text: string | undefined): string[] {
  const entries = (text ?? '').split(/[\s,]+/).filter((entry) => entry !== '')
  if (entries.length > MAX_ALLOWED_CIDRS) throw new FormFieldError('allowedCidrs', `At most ${MAX_ALLOWED_CIDRS} addresses or CIDR blocks`)
  return entries.map((entry) => {
    const parsed = parseCidr(entry)
    if ('error' in parsed) throw new FormFieldError('allowedCidrs', parsed.error)
    return parsed.text
  })
}

/** How the rate-limit form names its fields in messages (the key service's: `Rate must be …`). */
const RATE_LIMIT_FIELDS = { rate: 'Requests per second', burst: 'Burst' } as const

/** The field of the rate-limit form a key service message is about, if any. */
function rateLimitFieldOf(message: string): RateLimitFormState['errorField'] {
  if (message.startsWith(RATE_LIMIT_FIELDS.rate)) return 'rate'
  if (message.startsWith(RATE_LIMIT_FIELDS.burst)) return 'burst'
  return undefined
}

/** The expiry chosen in the create form: a preset from now (the service's clock), or a date and time in UTC. */
export function expiryFromForm(preset: string | undefined, dateText: string | undefined, nowMs: number): Date | null {
  const chosen = EXPIRY_PRESETS.find((option) => option.value === (preset ?? 'never'))
  if (chosen === undefined) throw new FormFieldError('expires', 'Choose when the key expires')
  if (chosen.value === 'date') {
    const text = (dateText ?? '').trim()
    // A datetime-local field sends 2030-01-31T12:00 (or with seconds), which the page says is UTC.
    if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(text)) throw new FormFieldError('expires', 'Enter the expiry date and time, in UTC')
    try {
      return requireIsoTime(`${text}Z`, 'expiry')
    } catch {
      throw new FormFieldError('expires', 'Enter a real expiry date and time, in UTC')
    }
  }
  return chosen.seconds === null ? null : new Date(nowMs + chosen.seconds * 1000)
}

export async function keyRoutes(app: FastifyInstance, options: KeyRoutesOptions): Promise<void> {
  const { pool, keys, now, paths } = options

  /** Stores the one-time display of a new key for this session and answers the redirect to it. */
  async function reveal(request: FastifyRequest, reply: FastifyReply, area: KeyArea, created: CreatedKey, unconfirmed = false): Promise<FastifyReply> {
    const sealed = await storeReveal(pool, sessionOf(request).tokenHash, created.id, created.key, now())
    const revealPath = `${area.keysPath}/${created.id}/created`
    reply.setCookie(REVEAL_COOKIE, sealed, cookieOptions(revealPath, REVEAL_LIFETIME_MS / 1000))
    return reply.redirect(unconfirmed ? `${revealPath}?unconfirmed=1` : revealPath, 303)
  }

  /** A key of the area that the user may change, or a 403 / 404 page. */
  async function manageableKey(area: KeyArea, params: KeyParams): Promise<KeySummary> {
    requireManage(area)
    const key = await keys.find(keyIdOf(params), area.owner)
    if (key === undefined) throw new ApiError('keyNotFound')
    return key
  }

  for (const kind of areaKinds) {
    const areaOf = (request: FastifyRequest<{ Params: TenantParams }>): Promise<KeyArea> =>
      kind.resolve(pool, paths, sessionOf(request).userId, request.params.tenantId)

    app.get<{ Params: TenantParams }>(kind.path, async (request, reply) => {
      const area = await areaOf(request)
      const list = await keys.list(area.owner)
      return sendPage(reply, 200, keysPage({ paths, session: sessionOf(request), area, keys: list, ...noticeOf(request.query) }))
    })

    app.post<{ Params: TenantParams }>(kind.path, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
      const session = sessionOf(request)
      const area = await areaOf(request)
      requireManage(area)
      const form: CreateFormState = {
        name: formField(request, 'name') ?? '',
        expires: formField(request, 'expires') ?? 'never',
        expiresOn: formField(request, 'expiresOn') ?? '',
        allowedCidrs: formField(request, 'allowedCidrs') ?? '',
      }
      let created
      try {
        const expiresAt = expiryFromForm(form.expires, form.expiresOn, keys.now())
        created = await keys.create(area.owner, formField(request, 'name'), consoleActor(request), {
          expiresAt,
          allowedCidrs: cidrsFromForm(form.allowedCidrs),
          fields: { expiresAt: 'The expiry', allowedCidrs: 'Allowed addresses' },
        })
      } catch (error) {
        let field: CreateField
        if (error instanceof FormFieldError) field = error.field
        else if (isApiError(error) && (error.code === 'badRequest' || error.code === 'keyLimitReached'))
          field = error.message.startsWith('The expiry') ? 'expires' : 'name'
        else throw error
        const message = isApiError(error) && error.code === 'keyLimitReached' ? `${error.message}. ${KEY_LIMIT_HINT}` : error.message
        const list = await keys.list(area.owner)
        const status = isApiError(error) ? error.statusCode : 400
        return sendPage(reply, status, keysPage({ paths, session, area, keys: list, form: { ...form, error: message, errorField: field } }))
      }
      request.log.info({ keyId: created.id, scope: created.scope }, 'console: key created')
      return reveal(request, reply, area, created)
    })

    app.get<{ Params: KeyParams }>(`${kind.path}/:keyId/created`, async (request, reply) => {
      const session = sessionOf(request)
      const area = await areaOf(request)
      const keyId = keyIdOf(request.params)
      const key = await keys.find(keyId, area.owner)
      if (key === undefined) throw new ApiError('keyNotFound')
      const plaintext = await takeReveal(pool, session.tokenHash, keyId, request.cookies[REVEAL_COOKIE], now())
      reply.clearCookie(REVEAL_COOKIE, cookieOptions(`${area.keysPath}/${keyId}/created`))
      let replaced: ReplacedKey | undefined
      if (key.replaces !== null) {
        const old = await keys.find(key.replaces, area.owner)
        if (old !== undefined) replaced = { name: old.name, hint: old.hint, expiresAt: old.expiresAt, ended: old.status !== 'active' }
      }
      if (replaced !== undefined) replaced.unconfirmed = noticeOf(request.query).unconfirmed
      return sendPage(reply, plaintext === undefined ? 410 : 200, createdKeyPage(paths, session, area, key, plaintext, replaced))
    })

    app.get<{ Params: KeyParams }>(`${kind.path}/:keyId/roll`, async (request, reply) => {
      const area = await areaOf(request)
      const key = await manageableKey(area, request.params)
      return sendPage(reply, 200, rollPage(paths, sessionOf(request), area, key))
    })

    app.post<{ Params: KeyParams }>(`${kind.path}/:keyId/roll`, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
      const area = await areaOf(request)
      const key = await manageableKey(area, request.params)
      const grace = formField(request, 'grace')
      const preset = GRACE_PRESETS.find((option) => option.value === grace)
      if (preset === undefined) return sendPage(reply, 400, rollPage(paths, sessionOf(request), area, key, 'Choose how long the old key keeps working'))
      let rolled
      try {
        rolled = await keys.roll(key.id, consoleActor(request), area.owner, { graceSeconds: Number(preset.value) })
      } catch (error) {
        if (!isApiError(error) || error.code !== 'badRequest') throw error
        return sendPage(reply, 400, rollPage(paths, sessionOf(request), area, key, error.message, preset.value))
      }
      request.log.info({ keyId: rolled.id, replaces: rolled.replaces, graceSeconds: Number(preset.value) }, 'console: key rolled')
      // The new key is shown whatever happens (its plaintext exists nowhere else); the page says when the gateways did not all confirm.
      if (rolled.unconfirmed !== undefined) request.log.warn({ keyId: rolled.replaces }, rolled.unconfirmed)
      return reveal(request, reply, area, rolled, rolled.unconfirmed !== undefined)
    })

    app.get<{ Params: KeyParams }>(`${kind.path}/:keyId/addresses`, async (request, reply) => {
      const area = await areaOf(request)
      const key = await manageableKey(area, request.params)
      return sendPage(reply, 200, addressesPage(paths, sessionOf(request), area, key))
    })

    app.post<{ Params: KeyParams }>(`${kind.path}/:keyId/addresses`, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
      const area = await areaOf(request)
      const key = await manageableKey(area, request.params)
      const value = formField(request, 'allowedCidrs') ?? ''
      try {
        await keys.update(key.id, {
          actor: consoleActor(request),
          owner: area.owner,
          allowedCidrs: cidrsFromForm(value),
          fields: { allowedCidrs: 'Allowed addresses' },
        })
      } catch (error) {
        if (!(error instanceof FormFieldError) && (!isApiError(error) || error.code !== 'badRequest')) throw error
        return sendPage(reply, 400, addressesPage(paths, sessionOf(request), area, key, { value, error: error.message }))
      }
      request.log.info({ keyId: key.id }, 'console: key addresses changed')
      return reply.redirect(afterChange(area, 'addresses'), 303)
    })

    app.get<{ Params: KeyParams }>(`${kind.path}/:keyId/rate-limit`, async (request, reply) => {
      const area = await areaOf(request)
      requireRateLimitSetter(area)
      const key = await manageableKey(area, request.params)
      return sendPage(reply, 200, rateLimitPage(paths, sessionOf(request), area, key))
    })

    app.post<{ Params: KeyParams }>(`${kind.path}/:keyId/rate-limit`, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
      const area = await areaOf(request)
      requireRateLimitSetter(area)
      const key = await manageableKey(area, request.params)
      const action = formField(request, 'action') ?? 'set'
      const form = { rate: (formField(request, 'rate') ?? '').trim(), burst: (formField(request, 'burst') ?? '').trim() }
      if (action !== 'set' && action !== 'clear') {
        return sendPage(
          reply,
          400,
          rateLimitPage(paths, sessionOf(request), area, key, { ...form, error: 'Choose to save the limit or to use the route default' }),
        )
      }
      const rateLimit = action === 'clear' ? null : { rate: parseDecimal(form.rate), burst: parseDecimal(form.burst) }
      try {
        await keys.update(key.id, { actor: consoleActor(request), owner: area.owner, rateLimit, fields: RATE_LIMIT_FIELDS })
      } catch (error) {
        if (!isApiError(error) || error.code !== 'badRequest') throw error
        return sendPage(
          reply,
          400,
          rateLimitPage(paths, sessionOf(request), area, key, { ...form, error: error.message, errorField: rateLimitFieldOf(error.message) }),
        )
      }
      request.log.info({ keyId: key.id, rateLimit }, 'console: key rate limit changed')
      return reply.redirect(afterChange(area, 'rate-limit'), 303)
    })

    for (const action of ['revoke', 'delete'] as const satisfies readonly KeyAction[]) {
      app.get<{ Params: KeyParams }>(`${kind.path}/:keyId/${action}`, async (request, reply) => {
        const area = await areaOf(request)
        requireManage(area)
        const key = await keys.find(keyIdOf(request.params), area.owner)
        if (key === undefined) throw new ApiError('keyNotFound')
        return sendPage(reply, 200, confirmPage(paths, sessionOf(request), area, key, action))
      })

      app.post<{ Params: KeyParams }>(`${kind.path}/:keyId/${action}`, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply: FastifyReply) => {
        const area = await areaOf(request)
        requireManage(area)
        const keyId = keyIdOf(request.params)
        const actor = consoleActor(request)
        const result = action === 'revoke' ? await keys.revoke(keyId, actor, area.owner) : await keys.delete(keyId, actor, area.owner)
        request.log.info({ keyId, action, invalidation: result.invalidation }, `console: key ${action === 'revoke' ? 'revoked' : 'deleted'}`)
        return reply.redirect(afterChange(area, action === 'revoke' ? 'revoked' : 'deleted'), 303)
      })
    }
  }
}
