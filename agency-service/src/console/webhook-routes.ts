/**
 * Agency settings → Webhooks, for the agency's owners and admins (its members
 * get the page's tab and why it is not theirs):
 *
 *   GET  …/webhooks                                   the endpoints, how each stands, the registration form
 *   POST …/webhooks                                   register, then redirect to the one-time display of its secret
 *   GET  …/webhooks/:id/secret                        the signing secret, once (then 410)
 *   GET  …/webhooks/:id/edit          POST: save URL, events, enabled, then back to the list with a notice
 *   GET  …/webhooks/:id/roll-secret   confirmation;   POST: a new secret, then its one-time display
 *   GET  …/webhooks/:id/delete        confirmation;   POST: delete with its deliveries, then back to the list with a notice
 *   GET  …/webhooks/:id/deliveries                    the latest attempts (webhook-delivery-routes.ts)
 *   POST …/webhooks/:id/deliveries/:deliveryId/redeliver
 *
 * Every POST goes through submitOnce (form-once.ts): a repeated submission of
 * the same form gets the first one's answer (for a registration or a roll,
 * the same one-time display of the same secret), never a second change. The
 * same store and URL rules as the API (WEBHOOK_ALLOW_PRIVATE_ADDRESSES
 * included); another agency's endpoint is not found.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { MAX_ENDPOINTS_PER_AGENCY, WebhookStore } from '../webhooks/webhook-store.js'
import { sessionOf } from './authenticate.js'
import { cookieOptions, REVEAL_COOKIE } from './cookies.js'
import { FORM_BODY_LIMIT } from './csrf.js'
import { sendPage } from './error-page.js'
import type { FormOutcome } from './form-once.js'
import { submitOnce } from './form-once.js'
import { takeReveal } from './one-time-display.js'
import { webhookChangeRoutes } from './webhook-change-routes.js'
import { webhookDeliveryRoutes } from './webhook-delivery-routes.js'
import type { EndpointFormState } from './webhook-forms.js'
import { readEndpointForm } from './webhook-forms.js'
import { secretPage } from './webhook-form-views.js'
import type { WebhookPageContext } from './webhook-page.js'
import type { EndpointParams, TenantParams, WebhookRouteContext, WebhookRoutesOptions } from './webhook-route-context.js'
import { areaOf, endpointOf, managed, pageContext, revealSecret, takeWebhookNotice, WEBHOOKS_ROUTE } from './webhook-route-context.js'
import { webhooksNotYoursPage, webhooksPage } from './webhook-views.js'

export type { WebhookRoutesOptions } from './webhook-route-context.js'

export async function webhookConsoleRoutes(app: FastifyInstance, options: WebhookRoutesOptions): Promise<void> {
  const context: WebhookRouteContext = { ...options, app, store: new WebhookStore(options.pool) }
  listRoutes(context)
  secretRoute(context)
  webhookChangeRoutes(context)
  webhookDeliveryRoutes(context)
}

async function listPage(context: WebhookRouteContext, page: WebhookPageContext, request: FastifyRequest, form: EndpointFormState): Promise<string> {
  const agencyId = page.area.agency.id
  const [endpoints, health] = await Promise.all([context.store.all(agencyId), context.store.health(agencyId)])
  const notice = await takeWebhookNotice(context, request, page.webhooksPath)
  return webhooksPage({ ...page, endpoints, health, form, notice })
}

function listRoutes(context: WebhookRouteContext): void {
  const { app, store, policy } = context

  app.get<{ Params: TenantParams }>(WEBHOOKS_ROUTE, async (request, reply) => {
    const area = await areaOf(context, request)
    if (area.webhooksPath !== null && !area.canManageWebhooks) {
      return sendPage(reply, 403, webhooksNotYoursPage(pageContext(context, request, area, area.webhooksPath)))
    }
    const page = await managed(context, request)
    return sendPage(reply, 200, await listPage(context, page, request, {}))
  })

  app.post<{ Params: TenantParams }>(WEBHOOKS_ROUTE, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    const page = await managed(context, request)
    const form = readEndpointForm(request, policy, false)
    return submitOnce(context, request, reply, async () => {
      const refused = async (status: number, state: EndpointFormState): Promise<FormOutcome> => ({
        kind: 'page',
        status,
        body: await listPage(context, page, request, state),
      })
      if (form.errors.length > 0) return refused(400, form.state)
      const created = await store.create(page.area.agency.id, form.url, form.events)
      if (created === undefined) {
        return refused(409, { ...form.state, errors: [{ message: `An agency has at most ${MAX_ENDPOINTS_PER_AGENCY} webhook endpoints: delete one first` }] })
      }
      request.log.info({ endpointId: created.id, agencyId: page.area.agency.id }, 'console: webhook endpoint registered')
      return revealSecret(page, created, false)
    })
  })
}

/** The signing secret after a registration or a roll, the first time the page is opened. */
function secretRoute(context: WebhookRouteContext): void {
  context.app.get<{ Params: EndpointParams }>(`${WEBHOOKS_ROUTE}/:id/secret`, async (request, reply) => {
    const page = await managed(context, request)
    const endpoint = await endpointOf(context, page, request.params)
    const secret = await takeReveal(context.pool, 'webhook-secret', sessionOf(request).tokenHash, endpoint.id, request.cookies[REVEAL_COOKIE], context.now())
    reply.clearCookie(REVEAL_COOKIE, cookieOptions(`${page.webhooksPath}/${endpoint.id}/secret`))
    const rolled = (request.query as Record<string, unknown> | undefined)?.['rolled'] === '1'
    return sendPage(reply, secret === undefined ? 410 : 200, secretPage(page, endpoint, secret, rolled))
  })
}
