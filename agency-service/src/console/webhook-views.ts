/**
 * Agency settings → Webhooks: the endpoints first, each with its state in
 * words (healthy, failing with its last error, disabled) so a failing one
 * stands out, one actions menu per row, relative times with the exact time
 * on hover; then the registration form (webhook-form-views.ts). A member of
 * the agency gets the page's place in the tabs and why it is not theirs.
 */
import type { EndpointHealth, WebhookEndpoint } from '../webhooks/webhook-store.js'
import { WEBHOOK_MANAGERS_ONLY } from './access.js'
import type { FieldError } from './form-errors.js'
import { errorSummary, formTitle } from './form-errors.js'
import type { SafeHtml } from './html.js'
import { html } from './html.js'
import { settingsTabs, tenantName } from './key-views.js'
import { page } from './layout.js'
import { relativeTime } from './relative-time.js'
import type { EndpointFormState } from './webhook-forms.js'
import { registerForm } from './webhook-form-views.js'
import type { WebhookNotice, WebhookPageContext } from './webhook-page.js'
import { endpointLabel, noticeBox, webhookCrumbs } from './webhook-page.js'

export type EndpointState = 'healthy' | 'failing' | 'disabled'

/** Failing: its latest attempt failed, or events were given up (they wait for a redelivery). */
export function endpointState(endpoint: WebhookEndpoint, health: EndpointHealth | undefined): EndpointState {
  if (!endpoint.enabled) return 'disabled'
  if (health !== undefined && (health.lastDelivered === false || health.failed > 0)) return 'failing'
  return 'healthy'
}

function plural(count: number, one: string): string {
  return `${count} ${one}${count === 1 ? '' : 's'}`
}

function stateCell(context: WebhookPageContext, endpoint: WebhookEndpoint, health: EndpointHealth | undefined): SafeHtml {
  const state = endpointState(endpoint, health)
  const { now } = context
  const last = health?.lastAttemptAt ?? null
  const waiting = health !== undefined && health.pending > 0 && html`<br><span class="hint">${plural(health.pending, 'event')} waiting</span>`
  switch (state) {
    case 'disabled':
      return html`<span class="status status-revoked">Disabled</span>${waiting}`
    case 'failing':
      return html`<span class="status status-failing">Failing</span>${
        health!.lastError !== null &&
        html`<br><span class="hint">Last error ${relativeTime(last, now, '')}: <span class="webhook-error">${health!.lastError}</span></span>`
      }${health!.failed > 0 && html`<br><span class="hint">${plural(health!.failed, 'event')} given up: redeliver from Deliveries</span>`}${
        health!.pending > 0 && html`<br><span class="hint">${plural(health!.pending, 'event')} being retried</span>`
      }`
    case 'healthy':
      return html`<span class="status status-active">Healthy</span><br><span class="hint">${
        last === null ? 'No delivery yet' : html`Last delivered ${relativeTime(last, now, '')}`
      }</span>${waiting}`
  }
}

function actionsMenu(context: WebhookPageContext, endpoint: WebhookEndpoint): SafeHtml {
  const label = endpointLabel(endpoint)
  const base = `${context.webhooksPath}/${endpoint.id}`
  // Each link's name says which endpoint it is about: two rows never offer two identical "Delete" links.
  const item = (action: string, text: string, name: string): SafeHtml => html`<li><a href="${base}/${action}" aria-label="${name}">${text}</a></li>`
  return html`<details class="row-menu"><summary aria-label="Actions for ${label}">Actions</summary><ul>${item(
    'deliveries',
    'Deliveries',
    `Deliveries to ${label}`,
  )}${item('edit', 'Edit', `Edit ${label}`)}${item('roll-secret', 'Roll secret', `Roll the secret of ${label}`)}${item('delete', 'Delete', `Delete ${label}`)}</ul></details>`
}

function endpointRow(context: WebhookPageContext, endpoint: WebhookEndpoint, health: EndpointHealth | undefined): SafeHtml {
  const failing = endpointState(endpoint, health) === 'failing'
  return html`<tr id="endpoint-${endpoint.id}"${failing ? html` class="failing"` : ''}>
  <th scope="row" data-label="Endpoint"><code class="webhook-url">${endpoint.url}</code></th>
  <td data-label="State">${stateCell(context, endpoint, health)}</td>
  <td data-label="Events">${endpoint.events.map((type, index) => html`${index > 0 ? ', ' : ''}<code>${type}</code>`)}</td>
  <td data-label="Created">${relativeTime(endpoint.createdAt, context.now, '—')}</td>
  <td data-label="Actions" class="actions-cell">${actionsMenu(context, endpoint)}</td>
</tr>`
}

/** Above the list, when any endpoint fails: which, with a link to each row. */
function failingSummary(failing: readonly WebhookEndpoint[]): SafeHtml | false {
  if (failing.length === 0) return false
  return html`<div class="warning" id="failing-endpoints"><p><strong>${
    failing.length === 1 ? '1 endpoint is failing' : `${failing.length} endpoints are failing`
  }:</strong> ${failing.map((endpoint, index) => html`${index > 0 ? ', ' : ''}<a href="#endpoint-${endpoint.id}">${endpointLabel(endpoint)}</a>`)}.</p>
<p>Its Deliveries page shows each attempt; once the endpoint answers again, redeliver what was given up.</p></div>`
}

export interface WebhooksPageOptions extends WebhookPageContext {
  endpoints: readonly WebhookEndpoint[]
  health: ReadonlyMap<string, EndpointHealth>
  /** The registration form as it was sent, with its problems (one of the form as a whole: the endpoint limit). */
  form?: EndpointFormState
  /** The notice a change left for this page, shown once. */
  notice?: { notice: WebhookNotice; subject: string | null } | undefined
}

function lede(context: WebhookPageContext): SafeHtml {
  return html`<p class="lede">Endpoints where ${tenantName(context.area)} hears of its keys and sub-accounts: each event is signed with the endpoint’s secret and retried for 72 hours until the endpoint answers 2xx.</p>`
}

export function webhooksPage(options: WebhooksPageOptions): string {
  const { endpoints, health } = options
  const errors: readonly FieldError[] = options.form?.errors ?? []
  const failing = endpoints.filter((endpoint) => endpointState(endpoint, health.get(endpoint.id)) === 'failing')
  return page({
    paths: options.paths,
    title: formTitle(`Webhooks · ${options.area.agency.name}`, errors),
    session: options.session,
    crumbs: webhookCrumbs(options),
    body: html`${errorSummary(errors)}<div class="page-head"><h1>Webhooks</h1><a class="button" href="#register-heading">Register endpoint</a></div>
${lede(options)}
${settingsTabs(options.area, 'webhooks')}
${noticeBox(options.notice)}
${failingSummary(failing)}
<h2 class="visually-hidden">Endpoints</h2>
${
  endpoints.length === 0
    ? html`<p>No endpoint yet.</p>`
    : html`<table class="webhook-table stacking">
  <caption class="visually-hidden">Webhook endpoints of ${options.area.agency.name}, oldest first</caption>
  <thead><tr><th scope="col">Endpoint</th><th scope="col">State</th><th scope="col">Events</th><th scope="col">Created</th><th scope="col">Actions</th></tr></thead>
  <tbody>${endpoints.map((endpoint) => endpointRow(options, endpoint, health.get(endpoint.id)))}</tbody>
</table>`
}
${registerForm(options, options.form ?? {})}`,
  })
}

/** For a member of the agency: where webhooks are, and why they are not theirs to see or change. */
export function webhooksNotYoursPage(context: WebhookPageContext): string {
  return page({
    paths: context.paths,
    title: `Webhooks · ${context.area.agency.name}`,
    session: context.session,
    crumbs: webhookCrumbs(context),
    body: html`<h1>Webhooks</h1>
${lede(context)}
${settingsTabs(context.area, 'webhooks')}
<div class="warning" role="alert"><p>${WEBHOOK_MANAGERS_ONLY}.</p>
<p>An endpoint receives the events of every key and sub-account of the agency, so registering, changing or reading one is for its owners and admins. Ask one of them if you need an endpoint registered, changed or redelivered.</p></div>
<p><a href="${context.area.keysPath}">Back to the API keys of ${context.area.agency.name}</a></p>`,
  })
}
