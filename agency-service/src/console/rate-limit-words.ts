/**
 * Rate limits in plain words (issue 34, finding 9): a limit, the route
 * default in numbers (the limits a key meets on the routes of its scope when
 * it has no limit of its own, as the gateway's routes file sets them:
 * ROUTES_FILE, which agency-service reads as the gateway does,
 * permission-catalog.ts), what every key of a tenant shares, and why a
 * member is not offered to change a limit.
 */
import type { RateLimit } from '@scoped/shared/rate-limit'
import type { LimitKind } from '@scoped/shared/route-limits'
import type { RouteRateLimits } from '../keys/permission-catalog.js'
import type { KeyArea } from './access.js'
import type { SafeHtml } from './html.js'
import { html } from './html.js'

/** Who changes a rate limit and why, for those who may not. */
export const RATE_LIMIT_SETTERS = 'only the agency’s owners and admins change it: they share out what the agency may send among its sub-accounts'

export function rateLimitText(limit: RateLimit): string {
  const perMinute = Math.round(limit.rate * 60 * 100) / 100
  const pace = limit.rate < 10 ? `${perMinute} requests per minute` : `${limit.rate} requests per second`
  return `${pace}, bursts of ${limit.burst}`
}

function limitWords(limit: RateLimit | undefined): string {
  return limit === undefined ? 'no limit' : rateLimitText(limit)
}

/** One kind of limit over the routes: the same words for every route, or each route's. */
function overRoutes(routes: readonly RouteRateLimits[], kind: LimitKind): { every: string | undefined } | { each: Array<[string, string]> } {
  const each = routes.map((route): [string, string] => [route.prefix, limitWords(route.limits[kind])])
  const distinct = new Set(each.map(([, words]) => words))
  if (distinct.size <= 1) return { every: [...distinct][0] }
  return { each }
}

function perRoute(each: ReadonlyArray<[string, string]>): SafeHtml {
  return html`${each.map(([prefix, words], index) => html`${index > 0 ? '; ' : ''}on <code>${prefix}</code> ${words}`)}`
}

/** The route default for a key of the area's scope, in a sentence: "Route default: 120 requests per minute, bursts of 20, …". */
export function routeDefaultLine(routes: readonly RouteRateLimits[], id = 'route-default'): SafeHtml {
  const key = overRoutes(routes, 'key')
  const words =
    'each' in key
      ? html`it differs by route: ${perRoute(key.each)}`
      : key.every === undefined || key.every === 'no limit'
        ? html`<strong>no limit for a key on its own</strong>`
        : html`<strong>${key.every}</strong> for each key, on each route it reaches`
  return html`<p id="${id}">Route default: ${words}.</p>`
}

/** What every key of the tenant (and of the agency) shares whatever its own limit, from the same file; nothing when unlimited. */
export function sharedLimitsLine(area: KeyArea, routes: readonly RouteRateLimits[]): SafeHtml | false {
  const tenant = overRoutes(routes, 'tenant')
  const agency = overRoutes(routes, 'agency')
  const part = (who: string, limits: typeof tenant): SafeHtml | false => {
    if ('each' in limits) return html`all keys of ${who} together: ${perRoute(limits.each)}`
    if (limits.every === undefined || limits.every === 'no limit') return false
    return html`all keys of ${who} together get <strong>${limits.every}</strong> on each route`
  }
  const agencyWho = area.subAccount === null ? `the agency ${area.agency.name}` : `the agency ${area.agency.name} (every sub-account’s)`
  const parts = [part(area.subAccount?.name ?? area.agency.name, tenant), part(agencyWho, agency)].filter((entry): entry is SafeHtml => entry !== false)
  if (parts.length === 0) return false
  return html`<p id="shared-limits">Whatever a key’s own limit, ${parts.map((entry, index) => html`${index > 0 ? '; and ' : ''}${entry}`)}.</p>`
}
