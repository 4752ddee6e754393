/**
 * The Webhooks forms and the page they lead to: the endpoint's fields (URL
 * and events, shared by registration and editing), the edit page (with
 * enabled), the roll and delete confirmations, and the page that shows a
 * signing secret once (after a registration or a roll; one-time-display.ts keeps
 * it sealed until then). Each form carries a one-time form token
 * (form-token.ts) and shows its problems with form-errors.ts.
 */
import { MAX_URL_LENGTH } from '../webhooks/address-policy.js'
import { webhookEventTypes } from '../webhooks/event-types.js'
import type { WebhookEndpoint } from '../webhooks/webhook-store.js'
import type { FieldError } from './form-errors.js'
import { errorSummary, fieldAttributes, fieldMessages, formTitle } from './form-errors.js'
import { formTokenInput } from './form-token.js'
import type { SafeHtml } from './html.js'
import { html } from './html.js'
import { secretField } from './secret-field.js'
import { csrfInput, page } from './layout.js'
import type { EndpointFormState } from './webhook-forms.js'
import { EVENTS_FIELD, eventFieldId, URL_FIELD } from './webhook-forms.js'
import type { WebhookPageContext } from './webhook-page.js'
import { endpointLabel, webhookCrumbs } from './webhook-page.js'

/** The URL and the events, each marked when it is what is wrong. */
export function endpointFields(state: EndpointFormState): SafeHtml {
  const errors = state.errors ?? []
  const chosen = new Set(state.events ?? [])
  return html`<div class="field">
    <label for="${URL_FIELD}">URL</label>
    <p class="hint" id="${URL_FIELD}-hint">An https:// address on the public internet. Deliveries are POSTed there, signed as Standard Webhooks.</p>
    ${fieldMessages(errors, URL_FIELD)}
    <input type="url" id="${URL_FIELD}" name="url" maxlength="${MAX_URL_LENGTH}" autocomplete="off" spellcheck="false" class="wide-input" value="${state.url ?? ''}"${fieldAttributes(errors, URL_FIELD, `${URL_FIELD}-hint`)}>
  </div>
  <fieldset${fieldAttributes(errors, EVENTS_FIELD, 'webhook-events-hint')}>
    <legend>Events</legend>
    <p class="hint" id="webhook-events-hint">Choose at least one. Events of the agency’s sub-accounts are included.</p>
    ${fieldMessages(errors, EVENTS_FIELD)}
    <div class="event-choices">${webhookEventTypes.map(
      (type) =>
        html`<div class="choice"><input type="checkbox" id="${eventFieldId(type)}" name="events" value="${type}"${chosen.has(type) ? ' checked' : ''}><label for="${eventFieldId(type)}"><code>${type}</code></label></div>`,
    )}</div>
  </fieldset>`
}

/** The registration form, below the list. */
export function registerForm(context: WebhookPageContext, state: EndpointFormState): SafeHtml {
  return html`<section aria-labelledby="register-heading">
<h2 id="register-heading">Register an endpoint</h2>
<form method="post" action="${context.webhooksPath}" class="panel" novalidate>
  ${csrfInput(context.session.csrfToken)}${formTokenInput()}
  ${endpointFields(state)}
  <div class="actions"><button type="submit">Register endpoint</button></div>
</form>
</section>`
}

function endpointLine(endpoint: WebhookEndpoint): SafeHtml {
  return html`<p>Endpoint: <code class="webhook-url">${endpoint.url}</code> (${endpoint.enabled ? 'enabled' : 'disabled'})</p>`
}

export function editPage(context: WebhookPageContext, endpoint: WebhookEndpoint, state: EndpointFormState = {}): string {
  const errors: readonly FieldError[] = state.errors ?? []
  const shown: EndpointFormState = { url: state.url ?? endpoint.url, events: state.events ?? endpoint.events, errors }
  const enabled = state.enabled ?? endpoint.enabled
  const radio = (value: boolean, label: string) =>
    html`<div class="choice"><input type="radio" id="webhook-enabled-${String(value)}" name="enabled" value="${String(value)}"${value === enabled ? ' checked' : ''}><label for="webhook-enabled-${String(value)}">${label}</label></div>`
  return page({
    paths: context.paths,
    title: formTitle(`Edit endpoint · ${endpointLabel(endpoint)}`, errors),
    session: context.session,
    crumbs: webhookCrumbs(context, { label: 'Edit endpoint' }),
    body: html`${errorSummary(errors)}<h1>Edit endpoint</h1>
<form method="post" action="${context.webhooksPath}/${endpoint.id}/edit" class="panel" novalidate>
  ${csrfInput(context.session.csrfToken)}${formTokenInput()}
  ${endpointFields(shown)}
  <fieldset>
    <legend>Deliveries</legend>
    ${radio(true, 'Enabled: events are sent to this endpoint')}
    ${radio(false, 'Disabled: no event is queued for it until it is enabled again')}
  </fieldset>
  <div class="actions"><button type="submit">Save endpoint</button><a href="${context.webhooksPath}">Cancel</a></div>
</form>`,
  })
}

export type EndpointAction = 'roll-secret' | 'delete'

const confirmText: Record<EndpointAction, { title: string; explain: string; button: string; danger: boolean }> = {
  'roll-secret': {
    title: 'Roll the signing secret?',
    explain:
      'A new secret is made and shown once. From that moment every delivery is signed with the new secret only: update your receiver with it straight away, or it will refuse the deliveries as badly signed.',
    button: 'Roll secret',
    danger: false,
  },
  delete: {
    title: 'Delete endpoint?',
    explain: 'The endpoint, its pending deliveries and its record of attempts are removed. No event is sent to it again. This cannot be undone.',
    button: 'Delete endpoint',
    danger: true,
  },
}

export function confirmEndpointPage(context: WebhookPageContext, endpoint: WebhookEndpoint, action: EndpointAction): string {
  const text = confirmText[action]
  return page({
    paths: context.paths,
    title: `${text.title} · ${endpointLabel(endpoint)}`,
    session: context.session,
    crumbs: webhookCrumbs(context, { label: action === 'delete' ? 'Delete endpoint' : 'Roll secret' }),
    body: html`<h1>${text.title}</h1>
<div class="panel">
  ${endpointLine(endpoint)}
  <p>${text.explain}</p>
  <form method="post" action="${context.webhooksPath}/${endpoint.id}/${action}">
    ${csrfInput(context.session.csrfToken)}${formTokenInput()}
    <div class="actions"><button type="submit"${text.danger ? html` class="button-danger"` : ''}>${text.button}</button><a href="${context.webhooksPath}">Cancel</a></div>
  </form>
</div>`,
  })
}

/** After a registration or a roll: the secret, the first time the page is opened; afterwards, that it cannot be shown again (410). */
export function secretPage(context: WebhookPageContext, endpoint: WebhookEndpoint, secret: string | undefined, rolled: boolean): string {
  const title = rolled ? 'Signing secret rolled' : 'Endpoint registered'
  const back = html`<p class="actions"><a class="button" href="${context.webhooksPath}">${secret === undefined ? 'Back to webhooks' : 'Done: back to webhooks'}</a></p>`
  const body =
    secret === undefined
      ? html`<h1>${title}</h1>
<div class="warning" role="alert"><p>The signing secret of <code class="webhook-url">${endpoint.url}</code> has already been shown once: it cannot be shown again.
If you did not copy it, roll the secret to get a new one.</p></div>
${back}`
      : html`<h1>${title}</h1>
<div class="warning" role="alert">
  <p><strong>Copy the signing secret now. It will not be shown again.</strong></p>
  <p>${rolled ? 'The old secret signs nothing from now on: give your receiver this one. ' : ''}Keep it on the server that receives the deliveries, out of source control.</p>
</div>
${secretField('webhook-secret', html`Signing secret of ${endpointLabel(endpoint)}`, secret)}
<p>Verify each delivery with it: the <code>standardwebhooks</code> library, or any Standard Webhooks library. Events: ${endpoint.events.map(
          (type, index) => html`${index > 0 ? ', ' : ''}<code>${type}</code>`,
        )}.</p>
${back}`
  return page({ paths: context.paths, title, session: context.session, crumbs: webhookCrumbs(context, { label: title }), body })
}
