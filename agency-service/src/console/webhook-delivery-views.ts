/**
 * An endpoint's deliveries: every attempt, newest first, with what came of
 * it (the answer's status, how long it took, the error), relative times with
 * the exact time on hover, and a Redeliver form per attempt (one-time form
 * token: a double submit queues the event once).
 */
import type { WebhookDelivery, WebhookEndpoint } from '../webhooks/webhook-store.js'
import { formTokenInput } from './form-token.js'
import type { SafeHtml } from './html.js'
import { html } from './html.js'
import { csrfInput, page } from './layout.js'
import { exactText, relativeTime } from './relative-time.js'
import type { WebhookNotice, WebhookPageContext } from './webhook-page.js'
import { endpointLabel, noticeBox, webhookCrumbs } from './webhook-page.js'

const stateNames = { pending: 'In flight', delivered: 'Delivered', failed: 'Failed' } as const
const stateClasses = { pending: 'status-rolling', delivered: 'status-active', failed: 'status-failing' } as const

function resultCell(delivery: WebhookDelivery): SafeHtml {
  return html`<span class="status ${stateClasses[delivery.state]}">${stateNames[delivery.state]}</span>${
    delivery.responseStatus !== null && html`<br><span class="hint">HTTP ${delivery.responseStatus}</span>`
  }`
}

function deliveryRow(context: WebhookPageContext, base: string, delivery: WebhookDelivery): SafeHtml {
  return html`<tr id="delivery-${delivery.id}">
  <th scope="row" data-label="Event"><code>${delivery.type}</code><br><span class="hint">attempt ${delivery.attempt}</span></th>
  <td data-label="When">${relativeTime(delivery.at, context.now, '—')}</td>
  <td data-label="Result">${resultCell(delivery)}</td>
  <td data-label="Duration">${delivery.durationMs === null ? '—' : `${delivery.durationMs} ms`}</td>
  <td data-label="Error">${delivery.error === null ? '—' : html`<span class="webhook-error">${delivery.error}</span>`}</td>
  <td data-label="Actions" class="actions-cell"><form method="post" action="${base}/${delivery.id}/redeliver">${csrfInput(context.session.csrfToken)}${formTokenInput()}<button type="submit" class="button-secondary" aria-label="Redeliver ${delivery.type} (attempt ${delivery.attempt}, ${exactText(delivery.at)})">Redeliver</button></form></td>
</tr>`
}

export interface DeliveriesPageOptions extends WebhookPageContext {
  endpoint: WebhookEndpoint
  deliveries: readonly WebhookDelivery[]
  notice?: { notice: WebhookNotice; subject: string | null } | undefined
}

export function deliveriesPage(options: DeliveriesPageOptions): string {
  const { endpoint, deliveries } = options
  const base = `${options.webhooksPath}/${endpoint.id}/deliveries`
  return page({
    paths: options.paths,
    title: `Deliveries · ${endpointLabel(endpoint)}`,
    session: options.session,
    crumbs: webhookCrumbs(options, { label: 'Deliveries' }),
    body: html`<h1>Deliveries</h1>
<p class="lede">To <code class="webhook-url">${endpoint.url}</code>. Redeliver sends the event again with the same webhook-id, and retries it for another 72 hours.</p>
${noticeBox(options.notice)}
${!endpoint.enabled && html`<div class="warning"><p>This endpoint is disabled: a redelivered event waits until it is enabled again (Edit, on the Webhooks page).</p></div>`}
${
  deliveries.length === 0
    ? html`<p>No delivery yet.</p>`
    : html`<table class="stacking">
  <caption class="visually-hidden">The latest attempts, newest first</caption>
  <thead><tr><th scope="col">Event</th><th scope="col">When</th><th scope="col">Result</th><th scope="col">Duration</th><th scope="col">Error</th><th scope="col">Actions</th></tr></thead>
  <tbody>${deliveries.map((delivery) => deliveryRow(options, base, delivery))}</tbody>
</table>`
}
<p><a href="${options.webhooksPath}">Back to webhooks</a></p>`,
  })
}
