/**
 * The console's changes of one key (see key-routes.ts for the list of
 * routes): roll, its allowed addresses, its own rate limit, revoke and
 * delete. Each GET shows its form or confirmation; each POST changes the key
 * through KeyService, which returns once every gateway replica has been told.
 */
import type { FastifyReply } from 'fastify'
import { parseDecimal } from '@scoped/shared/rate-limit'
import { requireManage, requireRateLimitSetter } from './access.js'
import { sessionOf } from './authenticate.js'
import { FORM_BODY_LIMIT, formField } from './csrf.js'
import { sendPage } from './error-page.js'
import { cidrsFromForm, isFormRefusal, RATE_LIMIT_FIELDS, rateLimitFieldOf } from './key-forms.js'
import type { KeyParams, KeyRouteContext } from './key-route-context.js'
import { afterChange, consoleActor, keyIdOf, staleKey } from './key-route-context.js'
import type { KeyAction } from './key-views.js'
import { addressesPage, confirmPage, GRACE_PRESETS, rateLimitPage, rollPage } from './key-views.js'

export function rollRoutes(context: KeyRouteContext): void {
  const { app, path, keys, paths, areaOf, manageableKey } = context

  app.get<{ Params: KeyParams }>(`${path}/:keyId/roll`, async (request, reply) => {
    const area = await areaOf(request)
    const key = await manageableKey(area, request.params)
    return sendPage(reply, 200, rollPage(paths, sessionOf(request), area, key))
  })

  app.post<{ Params: KeyParams }>(`${path}/:keyId/roll`, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    const area = await areaOf(request)
    const key = await manageableKey(area, request.params)
    const grace = formField(request, 'grace')
    const preset = GRACE_PRESETS.find((option) => option.value === grace)
    if (preset === undefined) return sendPage(reply, 400, rollPage(paths, sessionOf(request), area, key, 'Choose how long the old key keeps working'))
    let rolled
    try {
      rolled = await keys.roll(key.id, consoleActor(request), area.owner, { graceSeconds: Number(preset.value) })
    } catch (error) {
      if (!isFormRefusal(error)) throw error
      return sendPage(reply, 400, rollPage(paths, sessionOf(request), area, key, error.message, preset.value))
    }
    request.log.info({ keyId: rolled.id, replaces: rolled.replaces, graceSeconds: Number(preset.value) }, 'console: key rolled')
    // The new key is shown whatever happens (its plaintext exists nowhere else); the page says when the gateways did not all confirm.
    if (rolled.unconfirmed !== undefined) request.log.warn({ keyId: rolled.replaces }, rolled.unconfirmed)
    return context.reveal(request, reply, area, rolled, rolled.unconfirmed !== undefined)
  })
}

export function addressRoutes(context: KeyRouteContext): void {
  const { app, path, keys, paths, areaOf, manageableKey } = context

  app.get<{ Params: KeyParams }>(`${path}/:keyId/addresses`, async (request, reply) => {
    const area = await areaOf(request)
    const key = await manageableKey(area, request.params)
    return sendPage(reply, 200, addressesPage(paths, sessionOf(request), area, key))
  })

  app.post<{ Params: KeyParams }>(`${path}/:keyId/addresses`, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    const area = await areaOf(request)
    const key = await manageableKey(area, request.params)
    const value = formField(request, 'allowedCidrs') ?? ''
    try {
      const allowedCidrs = cidrsFromForm(value)
      await keys.update(key.id, { actor: consoleActor(request), owner: area.owner, allowedCidrs, fields: { allowedCidrs: 'Allowed addresses' } })
    } catch (error) {
      if (!isFormRefusal(error)) throw error
      return sendPage(reply, 400, addressesPage(paths, sessionOf(request), area, key, { value, error: error.message }))
    }
    request.log.info({ keyId: key.id }, 'console: key addresses changed')
    return afterChange(context, request, reply, area, 'addresses', key)
  })
}

export function rateLimitRoutes(context: KeyRouteContext): void {
  const { app, path, keys, paths, areaOf, manageableKey } = context

  app.get<{ Params: KeyParams }>(`${path}/:keyId/rate-limit`, async (request, reply) => {
    const area = await areaOf(request)
    requireRateLimitSetter(area)
    const key = await manageableKey(area, request.params)
    return sendPage(reply, 200, rateLimitPage(paths, sessionOf(request), area, key))
  })

  app.post<{ Params: KeyParams }>(`${path}/:keyId/rate-limit`, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    const area = await areaOf(request)
    requireRateLimitSetter(area)
    const key = await manageableKey(area, request.params)
    const action = formField(request, 'action') ?? 'set'
    const form = { rate: (formField(request, 'rate') ?? '').trim(), burst: (formField(request, 'burst') ?? '').trim() }
    const page = (error: string, errorField?: 'rate' | 'burst'): string =>
      rateLimitPage(paths, sessionOf(request), area, key, { ...form, error, ...(errorField === undefined ? {} : { errorField }) })
    if (action !== 'set' && action !== 'clear') return sendPage(reply, 400, page('Choose to save the limit or to use the route default'))
    const rateLimit = action === 'clear' ? null : { rate: parseDecimal(form.rate), burst: parseDecimal(form.burst) }
    try {
      await keys.update(key.id, { actor: consoleActor(request), owner: area.owner, rateLimit, fields: RATE_LIMIT_FIELDS })
    } catch (error) {
      if (!isFormRefusal(error)) throw error
      return sendPage(reply, 400, page(error.message, rateLimitFieldOf(error)))
    }
    request.log.info({ keyId: key.id, rateLimit }, 'console: key rate limit changed')
    return afterChange(context, request, reply, area, 'rate-limit', key)
  })
}

/** Revoke and delete: a confirmation page, then the change. */
export function endRoutes(context: KeyRouteContext): void {
  const { app, path, keys, paths, areaOf } = context
  for (const action of ['revoke', 'delete'] as const satisfies readonly KeyAction[]) {
    app.get<{ Params: KeyParams }>(`${path}/:keyId/${action}`, async (request, reply) => {
      const area = await areaOf(request)
      requireManage(area)
      const key = await keys.find(keyIdOf(request.params), area.owner)
      if (key === undefined) throw staleKey(area)
      return sendPage(reply, 200, confirmPage(paths, sessionOf(request), area, key, action))
    })

    app.post<{ Params: KeyParams }>(`${path}/:keyId/${action}`, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply: FastifyReply) => {
      const area = await areaOf(request)
      requireManage(area)
      const keyId = keyIdOf(request.params)
      const key = await keys.find(keyId, area.owner)
      if (key === undefined) throw staleKey(area)
      const actor = consoleActor(request)
      const result = action === 'revoke' ? await keys.revoke(keyId, actor, area.owner) : await keys.delete(keyId, actor, area.owner)
      request.log.info({ keyId, action, invalidation: result.invalidation }, `console: key ${action === 'revoke' ? 'revoked' : 'deleted'}`)
      return afterChange(context, request, reply, area, action === 'revoke' ? 'revoked' : 'deleted', key)
    })
  }
}
