/**
 * An endpoint's deliveries and redelivering one (see webhook-routes.ts). The
 * redeliver form goes through submitOnce (form-once.ts): a double submit
 * queues the event once and both submits are answered with the same redirect
 * to the deliveries, whose notice names the event, shown once.
 */
import { ApiError } from '@scoped/shared/errors'
import { uuidOrNotFound } from '@scoped/shared/validation'
import { FORM_BODY_LIMIT } from './csrf.js'
import { sendPage, StalePageError } from './error-page.js'
import { submitOnce } from './form-once.js'
import { deliveriesPage } from './webhook-delivery-views.js'
import type { EndpointParams, WebhookRouteContext } from './webhook-route-context.js'
import { afterChange, endpointOf, managed, staleEndpoint, takeWebhookNotice, WEBHOOKS_ROUTE } from './webhook-route-context.js'

const DELIVERIES_SHOWN = 50

export function webhookDeliveryRoutes(context: WebhookRouteContext): void {
  const { app, store } = context
  const path = `${WEBHOOKS_ROUTE}/:id/deliveries`

  app.get<{ Params: EndpointParams }>(path, async (request, reply) => {
    const page = await managed(context, request)
    const endpoint = await endpointOf(context, page, request.params)
    const deliveries = await store.deliveries(page.area.agency.id, endpoint.id, { limit: DELIVERIES_SHOWN })
    if (deliveries === undefined) throw staleEndpoint(page)
    const notice = await takeWebhookNotice(context, request, `${page.webhooksPath}/${endpoint.id}/deliveries`)
    return sendPage(reply, 200, deliveriesPage({ ...page, endpoint, deliveries: deliveries.data, notice }))
  })

  app.post<{ Params: EndpointParams & { deliveryId: string } }>(`${path}/:deliveryId/redeliver`, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    const page = await managed(context, request)
    const deliveryId = uuidOrNotFound(request.params.deliveryId, () => new ApiError('notFound', 'Delivery not found'))
    return submitOnce(context, request, reply, async () => {
      const endpoint = await endpointOf(context, page, request.params)
      const deliveriesPath = `${page.webhooksPath}/${endpoint.id}/deliveries`
      const delivery = await store.findDelivery(page.area.agency.id, endpoint.id, deliveryId)
      if (delivery === undefined || !(await store.redeliver(page.area.agency.id, endpoint.id, deliveryId))) {
        throw new StalePageError('This delivery no longer exists. Its page is out of date.', { href: deliveriesPath, label: 'Back to the deliveries' })
      }
      request.log.info({ endpointId: endpoint.id, deliveryId }, 'console: webhook event redelivered')
      return afterChange(context, request, deliveriesPath, 'redelivered', delivery.type)
    })
  })
}
