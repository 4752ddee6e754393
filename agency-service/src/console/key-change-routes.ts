/**
 * The console's changes of one key (see key-routes.ts for the list of
 * routes): roll, its allowed addresses, its own rate limit, revoke and
 * delete. Each GET shows its form or confirmation; each POST changes the key
 * through KeyService, which returns once every gateway replica has been told,
 * and goes through submitOnce (form-once.ts): a repeated submission of the
 * same form gets the first one's answer.
 */
import { cidrMatcher } from '@scoped/shared/ip-address'
import { parseDecimal } from '@scoped/shared/rate-limit'
import type { KeySummary } from '../keys/key-service.js'
import { requireManage, requireRateLimitSetter } from './access.js'
import { sessionOf } from './authenticate.js'
import { FORM_BODY_LIMIT, formField } from './csrf.js'
import { sendPage } from './error-page.js'
import { submitOnce } from './form-once.js'
import { addressesPage, GRACE_PRESETS, rollPage } from './key-form-views.js'
import { formProblems, rateLimitErrors, RATE_LIMIT_FIELDS, cidrAllowlist } from './key-forms.js'
import type { KeyParams, KeyRouteContext } from './key-route-context.js'
import { afterChange, consoleActor, keyIdOf, routeLimitsOf, staleKey } from './key-route-context.js'
import type { KeyAction } from './key-views.js'
import { confirmPage, rateLimitPage } from './key-views.js'

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
    const graceInput = `grace-${GRACE_PRESETS[0].value}`
    return submitOnce(context, request, reply, async () => {
      const refused = (message: string, chosen?: string) => ({
        kind: 'page' as const,
        status: 400,
        body: rollPage(paths, sessionOf(request), area, key, [{ field: graceInput, message }], chosen),
      })
      if (preset === undefined) return refused('Choose how long the old key keeps working')
      let rolled
      try {
        rolled = await keys.roll(key.id, consoleActor(request), area.owner, { graceSeconds: Number(preset.value) })
      } catch (error) {
        const problems = formProblems(error, graceInput)
        if (problems === undefined) throw error
        return refused(problems[0]!.message, preset.value)
      }
      request.log.info({ keyId: rolled.id, replaces: rolled.replaces, graceSeconds: Number(preset.value) }, 'console: key rolled')
      // The new key is shown whatever happens (its plaintext exists nowhere else); the page says when the gateways did not all confirm.
      if (rolled.unconfirmed !== undefined) request.log.warn({ keyId: rolled.replaces }, rolled.unconfirmed)
      return context.reveal(area, rolled, rolled.unconfirmed !== undefined)
    })
  })
}

/** The address the key was last used from, when the new list would refuse it. */
function excludedLastUse(key: KeySummary, allowedCidrs: readonly string[]): string | undefined {
  if (key.lastUsedIp === null || allowedCidrs.length === 0) return undefined
  return cidrMatcher(allowedCidrs)(key.lastUsedIp) ? undefined : key.lastUsedIp
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
    return submitOnce(context, request, reply, async () => {
      const page = (state: Parameters<typeof addressesPage>[4]) => ({
        kind: 'page' as const,
        status: 400,
        body: addressesPage(paths, sessionOf(request), area, key, state),
      })
      const { cidrs, errors } = cidrAllowlist(value)
      if (errors.length > 0) return page({ value, errors })
      // A list that would refuse the key's live traffic is saved only once the user has seen that and confirmed it (for that address).
      const excluded = excludedLastUse(key, cidrs)
      if (excluded !== undefined && formField(request, 'confirmExcluded') !== excluded) return { ...page({ value, excludes: excluded }), status: 200 }
      try {
        await keys.update(key.id, { actor: consoleActor(request), owner: area.owner, allowedCidrs: cidrs, fields: { allowedCidrs: 'Allowed addresses' } })
      } catch (error) {
        const problems = formProblems(error, 'key-cidrs')
        if (problems === undefined) throw error
        return page({ value, errors: problems })
      }
      request.log.info({ keyId: key.id }, 'console: key addresses changed')
      return afterChange(context, request, area, 'addresses', key)
    })
  })
}

export function rateLimitRoutes(context: KeyRouteContext): void {
  const { app, path, keys, paths, areaOf, manageableKey } = context

  app.get<{ Params: KeyParams }>(`${path}/:keyId/rate-limit`, async (request, reply) => {
    const area = await areaOf(request)
    requireRateLimitSetter(area)
    const key = await manageableKey(area, request.params)
    return sendPage(reply, 200, rateLimitPage(paths, sessionOf(request), area, key, routeLimitsOf(context, area)))
  })

  app.post<{ Params: KeyParams }>(`${path}/:keyId/rate-limit`, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    const area = await areaOf(request)
    requireRateLimitSetter(area)
    const key = await manageableKey(area, request.params)
    const action = formField(request, 'action') ?? 'set'
    const form = { rate: (formField(request, 'rate') ?? '').trim(), burst: (formField(request, 'burst') ?? '').trim() }
    return submitOnce(context, request, reply, async () => {
      const refused = (errors: ReturnType<typeof rateLimitErrors> & object) => ({
        kind: 'page' as const,
        status: 400,
        body: rateLimitPage(paths, sessionOf(request), area, key, routeLimitsOf(context, area), { ...form, errors }),
      })
      if (action !== 'set' && action !== 'clear') return refused([{ field: 'key-rate', message: 'Choose to save the limit or to use the route default' }])
      const rateLimit = action === 'clear' ? null : { rate: parseDecimal(form.rate), burst: parseDecimal(form.burst) }
      try {
        await keys.update(key.id, { actor: consoleActor(request), owner: area.owner, rateLimit, fields: RATE_LIMIT_FIELDS })
      } catch (error) {
        const errors = rateLimitErrors(error)
        if (errors === undefined) throw error
        return refused(errors)
      }
      request.log.info({ keyId: key.id, rateLimit }, 'console: key rate limit changed')
      return afterChange(context, request, area, 'rate-limit', key)
    })
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

    app.post<{ Params: KeyParams }>(`${path}/:keyId/${action}`, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
      const area = await areaOf(request)
      requireManage(area)
      const keyId = keyIdOf(request.params)
      return submitOnce(context, request, reply, async () => {
        // Inside the once-only work: a repeat of a delete finds no key, and must get the first answer.
        const key = await keys.find(keyId, area.owner)
        if (key === undefined) throw staleKey(area)
        const actor = consoleActor(request)
        const result = action === 'revoke' ? await keys.revoke(keyId, actor, area.owner) : await keys.delete(keyId, actor, area.owner)
        request.log.info({ keyId, action, invalidation: result.invalidation }, `console: key ${action === 'revoke' ? 'revoked' : 'deleted'}`)
        return afterChange(context, request, area, action === 'revoke' ? 'revoked' : 'deleted', key)
      })
    })
  }
}
