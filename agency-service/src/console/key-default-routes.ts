/**
 * A sub-account's default rate limit for its new keys, in its keys settings
 * (agency owners and admins only, like a key's own limit): every key created
 * for the sub-account gets it, so a member, who cannot change a key's limit,
 * cannot escape it by creating a fresh key. Keys that exist keep theirs.
 * Saved through routes/sub-account-store.ts (the API's and ctl's path too).
 */
import type { FastifyRequest } from 'fastify'
import { inTransaction } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import type { RateLimit } from '@scoped/shared/rate-limit'
import { MAX_BURST, MAX_RATE, parseDecimal } from '@scoped/shared/rate-limit'
import { setKeyRateLimit } from '../routes/sub-account-store.js'
import type { KeyArea } from './access.js'
import { requireRateLimitSetter } from './access.js'
import { sessionOf } from './authenticate.js'
import { FORM_BODY_LIMIT, formField } from './csrf.js'
import { sendPage } from './error-page.js'
import { html } from './html.js'
import type { FieldError } from './form-errors.js'
import { errorSummary, fieldAttributes, fieldMessages, formTitle } from './form-errors.js'
import type { FormOutcome } from './form-once.js'
import { submitOnce } from './form-once.js'
import { formTokenInput } from './form-token.js'
import { RATE_LIMIT_FIELDS, rateLimitErrors } from './key-forms.js'
import type { RouteRateLimits } from '../keys/permission-catalog.js'
import type { KeyRouteContext, TenantParams } from './key-route-context.js'
import { afterChange, consoleActor, routeLimitsOf } from './key-route-context.js'
import { crumbs } from './key-views.js'
import { csrfInput, page } from './layout.js'
import type { ConsolePaths } from './paths.js'
import { rateLimitText, routeDefaultLine, sharedLimitsLine } from './rate-limit-words.js'
import type { ConsoleSession } from './sessions.js'

const DEFAULT_INPUTS = { rate: 'default-rate', burst: 'default-burst' } as const

interface DefaultFormState {
  rate?: string
  burst?: string
  errors?: readonly FieldError[]
}

/** The sub-account's current default for new keys; null: the route defaults. */
export async function defaultKeyRateLimit(context: Pick<KeyRouteContext, 'pool'>, area: KeyArea): Promise<RateLimit | null> {
  if (area.subAccount === null) return null
  const { rows } = await context.pool.query<{ rate: number | null; burst: number | null }>(
    `SELECT key_rate_limit_rate AS rate, key_rate_limit_burst AS burst FROM sub_accounts WHERE id = $1`,
    [area.subAccount.id],
  )
  const row = rows[0]
  return row === undefined || row.rate === null || row.burst === null ? null : { rate: row.rate, burst: row.burst }
}

function defaultRateLimitPage(
  paths: ConsolePaths,
  session: ConsoleSession,
  area: KeyArea,
  current: RateLimit | null,
  routes: readonly RouteRateLimits[],
  state: DefaultFormState = {},
): string {
  const rate = state.rate ?? (current === null ? '' : String(current.rate))
  const burst = state.burst ?? (current === null ? '' : String(current.burst))
  const errors = state.errors ?? []
  return page({
    paths,
    title: formTitle('Default rate limit for new keys', errors),
    session,
    crumbs: crumbs(paths, area, 'Default rate limit'),
    body: html`${errorSummary(errors)}<h1>Default rate limit for new keys</h1>
<div class="panel">
  <p>Now: <strong>${current === null ? 'the route default' : rateLimitText(current)}</strong>.</p>
  ${routeDefaultLine(routes)}
  ${sharedLimitsLine(area, routes)}
  <p>Every key created for this sub-account from now on gets this limit, whoever creates it; members cannot change a key’s limit, so they cannot escape it with a fresh key. Keys that exist keep their own (change each with its <strong>Rate limit</strong> page); a rolled key’s replacement keeps the old key’s.</p>
  <form method="post" action="${area.keysPath}/default-rate-limit" novalidate>
    ${csrfInput(session.csrfToken)}${formTokenInput()}
    <div class="field-row">
      <div class="field"><label for="default-rate">Requests per second</label>
        <p class="hint" id="default-rate-hint">Above 0, at most ${MAX_RATE}.</p>
        ${fieldMessages(errors, 'default-rate')}
        <input type="text" inputmode="decimal" id="default-rate" name="rate" value="${rate}" autocomplete="off"${fieldAttributes(errors, 'default-rate', 'default-rate-hint')}></div>
      <div class="field"><label for="default-burst">Burst</label>
        <p class="hint" id="default-burst-hint">A whole number from 1 to ${MAX_BURST}.</p>
        ${fieldMessages(errors, 'default-burst')}
        <input type="text" inputmode="decimal" id="default-burst" name="burst" value="${burst}" autocomplete="off"${fieldAttributes(errors, 'default-burst', 'default-burst-hint')}></div>
    </div>
    <div class="actions"><button type="submit" name="action" value="set">Save default</button>${
      current !== null && html`<button type="submit" name="action" value="clear" class="button-secondary">Use the route default</button>`
    }<a href="${area.keysPath}">Cancel</a></div>
  </form>
</div>`,
  })
}

/** GET and POST …/sub-accounts/:id/keys/default-rate-limit. */
export function defaultRateLimitRoutes(context: KeyRouteContext): void {
  const { app, path, pool, paths, areaOf } = context
  const settableArea = async (request: FastifyRequest<{ Params: TenantParams }>): Promise<KeyArea & { subAccount: { id: string } }> => {
    const area = await areaOf(request)
    requireRateLimitSetter(area)
    if (area.subAccount === null) throw new ApiError('notFound')
    return area as KeyArea & { subAccount: { id: string } }
  }

  app.get<{ Params: TenantParams }>(`${path}/default-rate-limit`, async (request, reply) => {
    const area = await settableArea(request)
    return sendPage(reply, 200, defaultRateLimitPage(paths, sessionOf(request), area, await defaultKeyRateLimit(context, area), routeLimitsOf(context, area)))
  })

  app.post<{ Params: TenantParams }>(`${path}/default-rate-limit`, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    const area = await settableArea(request)
    const action = formField(request, 'action') ?? 'set'
    const form = { rate: (formField(request, 'rate') ?? '').trim(), burst: (formField(request, 'burst') ?? '').trim() }
    return submitOnce(context, request, reply, async () => {
      const refuse = async (errors: readonly FieldError[]): Promise<FormOutcome> => ({
        kind: 'page',
        status: 400,
        body: defaultRateLimitPage(paths, sessionOf(request), area, await defaultKeyRateLimit(context, area), routeLimitsOf(context, area), {
          ...form,
          errors,
        }),
      })
      if (action !== 'set' && action !== 'clear') return refuse([{ field: 'default-rate', message: 'Choose to save the default or to use the route default' }])
      const limit = action === 'clear' ? null : { rate: parseDecimal(form.rate), burst: parseDecimal(form.burst) }
      try {
        const target = { id: area.subAccount.id, agencyId: area.agency.id }
        await inTransaction(pool, (client) => setKeyRateLimit(client, target, limit, consoleActor(request), RATE_LIMIT_FIELDS))
      } catch (error) {
        const errors = rateLimitErrors(error, DEFAULT_INPUTS)
        if (errors === undefined) throw error
        return refuse(errors)
      }
      request.log.info({ subAccountId: area.subAccount.id, keyRateLimit: limit }, 'console: default key rate limit changed')
      return afterChange(context, request, area, 'default-rate-limit')
    })
  })
}
