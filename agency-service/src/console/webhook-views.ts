/**
 * Agency settings → Webhooks (the agency's owners and admins): the endpoints
 * with how their deliveries stand (a failing one says so), the form that
 * registers one, the page that shows a signing secret once (after a
 * registration or a roll), and an endpoint's delivery attempts with a
 * redeliver button each.
 */
import { webhookEventTypes } from '../webhooks/event-types.js'
import type { EndpointHealth, WebhookDelivery, WebhookEndpoint, WebhookEndpointWithSecret } from '../webhooks/webhook-store.js'
import type { KeyArea } from './access.js'
import type { SafeHtml } from './html.js'
import { html } from './html.js'
import { crumbs, formatTime, settingsTabs, tenantName } from './key-views.js'
import { csrfInput, page } from './layout.js'
import type { ConsolePaths } from './paths.js'
import type { ConsoleSession } from './sessions.js'

export const webhookNotices = ['disabled', 'enabled', 'redelivered', 'deleted'] as const
export type WebhookNotice = (typeof webhookNotices)[number]

const noticeText: Record<WebhookNotice, string> = {
  disabled: 'The endpoint was disabled: no event is queued for it until it is enabled again.',
  enabled: 'The endpoint was enabled: its pending deliveries resume.',
  redelivered: 'The event will be sent again in a moment, with the same webhook-id.',
  deleted: 'The endpoint was deleted, with its pending deliveries.',
}

export interface WebhookFormState {
  url?: string
  events?: readonly string[]
  error?: string
}

interface Context {
  paths: ConsolePaths
  session: ConsoleSession
  area: KeyArea
  webhooksPath: string
}

function section(webhooksPath: string): { label: string; href: string } {
  return { label: 'Webhooks', href: webhooksPath }
}

function healthCell(endpoint: WebhookEndpoint, health: EndpointHealth | undefined): SafeHtml {
  if (!endpoint.enabled) return html`<span class="status status-revoked">Disabled</span>`
  if (health !== undefined && health.failed > 0) {
    return html`<span class="status status-revoked">Failing</span> <span class="hint">${health.failed} event${health.failed === 1 ? '' : 's'} given up${
      health.lastError !== null && html`; last error: ${health.lastError}`
    }</span>`
  }
  if (health !== undefined && health.pending > 0)
    return html`<span class="status status-active">Active</span> <span class="hint">${health.pending} pending</span>`
  return html`<span class="status status-active">Active</span>`
}

function endpointRow(context: Context, endpoint: WebhookEndpoint, health: EndpointHealth | undefined): SafeHtml {
  const base = `${context.webhooksPath}/${endpoint.id}`
  const button = (action: string, label: string, extra: SafeHtml | string = '') =>
    html`<form method="post" action="${base}/${action}" class="inline-form">${csrfInput(context.session.csrfToken)}${extra}<button type="submit" class="link-button" aria-label="${label} ${endpoint.url}">${label}</button></form>`
  return html`<tr>
  <th scope="row"><code>${endpoint.url}</code></th>
  <td>${endpoint.events.join(', ')}</td>
  <td>${healthCell(endpoint, health)}</td>
  <td>${formatTime(endpoint.createdAt, '—')}</td>
  <td class="actions-cell"><a href="${base}/deliveries" aria-label="Deliveries to ${endpoint.url}">Deliveries</a>${button('roll-secret', 'Roll secret')}${
    endpoint.enabled
      ? button('enabled', 'Disable', html`<input type="hidden" name="enabled" value="false">`)
      : button('enabled', 'Enable', html`<input type="hidden" name="enabled" value="true">`)
  }${button('delete', 'Delete')}</td>
</tr>`
}

function createForm(context: Context, state: WebhookFormState): SafeHtml {
  const chosen = new Set(state.events ?? [])
  const invalid = state.error !== undefined ? html` aria-invalid="true"` : ''
  return html`<section class="panel" aria-labelledby="new-webhook">
<h2 id="new-webhook">Register an endpoint</h2>
${state.error !== undefined && html`<div class="alert" role="alert" tabindex="-1" id="webhook-error"><p>${state.error}</p></div>`}
<form method="post" action="${context.webhooksPath}">
  ${csrfInput(context.session.csrfToken)}
  <div class="field">
    <label for="webhook-url">URL</label>
    <input type="url" id="webhook-url" name="url" required maxlength="2000" autocomplete="off" value="${state.url ?? ''}" aria-describedby="webhook-url-hint${state.error !== undefined ? ' webhook-error' : ''}"${invalid}>
    <p class="hint" id="webhook-url-hint">An https:// address on the public internet. Deliveries are POSTed there, signed as Standard Webhooks.</p>
  </div>
  <fieldset class="field">
    <legend>Events</legend>
    ${webhookEventTypes.map(
      (type) =>
        html`<div class="checkbox"><input type="checkbox" id="event-${type}" name="events" value="${type}"${chosen.has(type) ? ' checked' : ''}><label for="event-${type}">${type}</label></div>`,
    )}
    <p class="hint">Events of the agency’s sub-accounts are included.</p>
  </fieldset>
  <div class="actions"><button type="submit">Register endpoint</button></div>
</form>
</section>`
}

export interface WebhooksPageOptions extends Context {
  endpoints: readonly WebhookEndpoint[]
  health: ReadonlyMap<string, EndpointHealth>
  form: WebhookFormState
  notice?: WebhookNotice | undefined
}

export function webhooksPage(options: WebhooksPageOptions): string {
  const { paths, session, area, webhooksPath, endpoints } = options
  return page({
    paths,
    title: `Webhooks · ${area.agency.name}`,
    session,
    crumbs: crumbs(paths, area, undefined, section(webhooksPath)),
    body: html`<h1>Webhooks</h1>
<p class="lede">Endpoints where ${tenantName(area)} hears of its keys and sub-accounts: each event is signed with the endpoint’s secret and retried for 72 hours until the endpoint answers 2xx.</p>
${settingsTabs(area, 'webhooks')}
${options.notice !== undefined && html`<div class="notice" role="status"><p>${noticeText[options.notice]}</p></div>`}
${
  endpoints.length === 0
    ? html`<p>No endpoint yet.</p>`
    : html`<div class="table-wrap" role="region" aria-labelledby="webhooks-caption" tabindex="0">
<table>
  <caption id="webhooks-caption" class="visually-hidden">Webhook endpoints of ${area.agency.name}</caption>
  <thead><tr><th scope="col">URL</th><th scope="col">Events</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col">Actions</th></tr></thead>
  <tbody>${endpoints.map((endpoint) => endpointRow(options, endpoint, options.health.get(endpoint.id)))}</tbody>
</table>
</div>`
}
${createForm(options, options.form)}`,
  })
}

/** After a registration or a roll: the secret, this once. */
export function webhookSecretPage(context: Context, endpoint: WebhookEndpointWithSecret, rolled: boolean): string {
  return page({
    paths: context.paths,
    title: 'Webhook signing secret',
    session: context.session,
    crumbs: crumbs(context.paths, context.area, 'Signing secret', section(context.webhooksPath)),
    body: html`<h1>${rolled ? 'The endpoint’s new signing secret' : 'Endpoint registered'}</h1>
<div class="warning" role="alert">
  <p>Copy the signing secret of <code>${endpoint.url}</code> now: it is shown this once.${rolled ? ' The old secret signs nothing from now on.' : ''}</p>
</div>
<div class="panel">
  <label for="webhook-secret">Signing secret</label>
  <input type="text" id="webhook-secret" readonly value="${endpoint.secret}" spellcheck="false" autocomplete="off">
  <p class="hint">Verify each delivery with it (the <code>standardwebhooks</code> library, or any Standard Webhooks library).</p>
  <p><a href="${context.webhooksPath}">Back to webhooks</a></p>
</div>`,
  })
}

const stateNames = { pending: 'Pending', delivered: 'Delivered', failed: 'Failed' } as const

export function deliveriesPage(context: Context, endpoint: WebhookEndpoint, deliveries: readonly WebhookDelivery[], notice?: WebhookNotice): string {
  const base = `${context.webhooksPath}/${endpoint.id}/deliveries`
  const row = (delivery: WebhookDelivery): SafeHtml => html`<tr>
  <td>${formatTime(delivery.at, '—')}</td>
  <th scope="row">${delivery.type}</th>
  <td>${delivery.attempt}</td>
  <td><span class="status status-${delivery.state === 'delivered' ? 'active' : delivery.state === 'failed' ? 'revoked' : 'expired'}">${stateNames[delivery.state]}</span></td>
  <td>${delivery.responseStatus ?? '—'}</td>
  <td>${delivery.durationMs === null ? '—' : `${delivery.durationMs} ms`}</td>
  <td>${delivery.error ?? ''}</td>
  <td><form method="post" action="${base}/${delivery.id}/redeliver">${csrfInput(context.session.csrfToken)}<button type="submit" class="link-button" aria-label="Redeliver ${delivery.type} of ${delivery.at}">Redeliver</button></form></td>
</tr>`
  return page({
    paths: context.paths,
    title: `Deliveries · ${endpoint.url}`,
    session: context.session,
    crumbs: crumbs(context.paths, context.area, 'Deliveries', section(context.webhooksPath)),
    body: html`<h1>Deliveries to <code>${endpoint.url}</code></h1>
${notice !== undefined && html`<div class="notice" role="status"><p>${noticeText[notice]}</p></div>`}
${
  deliveries.length === 0
    ? html`<p>No delivery yet.</p>`
    : html`<div class="table-wrap" role="region" aria-labelledby="deliveries-caption" tabindex="0">
<table>
  <caption id="deliveries-caption">The latest attempts, newest first</caption>
  <thead><tr><th scope="col">When</th><th scope="col">Event</th><th scope="col">Attempt</th><th scope="col">State</th><th scope="col">Status</th><th scope="col">Duration</th><th scope="col">Error</th><th scope="col">Actions</th></tr></thead>
  <tbody>${deliveries.map(row)}</tbody>
</table>
</div>`
}
<p><a href="${context.webhooksPath}">Back to webhooks</a></p>`,
  })
}
