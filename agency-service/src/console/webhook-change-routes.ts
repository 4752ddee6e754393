/**
 * The console's changes of one webhook endpoint (see webhook-routes.ts for
 * the list of routes): edit, roll the secret, delete. Each GET shows its form
 * or confirmation; each POST goes through submitOnce (form-once.ts), and
 * finds the endpoint inside the once-only work, so a repeat of a delete gets
 * the first answer rather than "not found".
 */
import { FORM_BODY_LIMIT } from './csrf.js'
import { sendPage } from './error-page.js'
import { submitOnce } from './form-once.js'
import { readEndpointForm } from './webhook-forms.js'
import type { EndpointAction } from './webhook-form-views.js'
import { confirmEndpointPage, editPage } from './webhook-form-views.js'
import { endpointLabel } from './webhook-page.js'
import type { EndpointParams, WebhookRouteContext } from './webhook-route-context.js'
import { afterChange, endpointIdOf, endpointOf, managed, revealSecret, staleEndpoint, WEBHOOKS_ROUTE } from './webhook-route-context.js'

export function webhookChangeRoutes(context: WebhookRouteContext): void {
  editRoutes(context)
  for (const action of ['roll-secret', 'delete'] as const) confirmRoutes(context, action)
}

function editRoutes(context: WebhookRouteContext): void {
  const { app, store } = context
  const path = `${WEBHOOKS_ROUTE}/:id/edit`

  app.get<{ Params: EndpointParams }>(path, async (request, reply) => {
    const page = await managed(context, request)
    return sendPage(reply, 200, editPage(page, await endpointOf(context, page, request.params)))
  })

  app.post<{ Params: EndpointParams }>(path, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    const page = await managed(context, request)
    const form = readEndpointForm(request, context.policy, true)
    return submitOnce(context, request, reply, async () => {
      const endpoint = await endpointOf(context, page, request.params)
      if (form.errors.length > 0) return { kind: 'page', status: 400, body: editPage(page, endpoint, form.state) }
      const enabled = form.enabled ?? endpoint.enabled
      const updated = await store.update(page.area.agency.id, endpoint.id, { url: form.url, events: form.events, enabled })
      if (updated === undefined) throw staleEndpoint(page)
      request.log.info({ endpointId: endpoint.id, enabled }, 'console: webhook endpoint changed')
      // Enabling or disabling is what the notice says when it is the change made; otherwise that the endpoint was saved.
      const sameTarget = updated.url === endpoint.url && updated.events.join() === endpoint.events.join()
      const notice = updated.enabled === endpoint.enabled || !sameTarget ? 'updated' : updated.enabled ? 'enabled' : 'disabled'
      return afterChange(context, request, page.webhooksPath, notice, endpointLabel(updated))
    })
  })
}

function confirmRoutes(context: WebhookRouteContext, action: EndpointAction): void {
  const { app, store } = context
  const path = `${WEBHOOKS_ROUTE}/:id/${action}`

  app.get<{ Params: EndpointParams }>(path, async (request, reply) => {
    const page = await managed(context, request)
    return sendPage(reply, 200, confirmEndpointPage(page, await endpointOf(context, page, request.params), action))
  })

  app.post<{ Params: EndpointParams }>(path, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    const page = await managed(context, request)
    const id = endpointIdOf(request.params)
    return submitOnce(context, request, reply, async () => {
      const agencyId = page.area.agency.id
      if (action === 'roll-secret') {
        const rolled = await store.rollSecret(agencyId, id)
        if (rolled === undefined) throw staleEndpoint(page)
        request.log.info({ endpointId: id }, 'console: webhook secret rolled')
        return revealSecret(page, rolled, true)
      }
      const endpoint = await endpointOf(context, page, request.params)
      if (!(await store.delete(agencyId, id))) throw staleEndpoint(page)
      request.log.info({ endpointId: id }, 'console: webhook endpoint deleted')
      return afterChange(context, request, page.webhooksPath, 'deleted', endpointLabel(endpoint))
    })
  })
}
