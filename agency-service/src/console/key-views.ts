/** The key pages: the list with its create form, the one-time display of a new key, and the revoke and delete confirmations. */
import { ACTIVE_KEY_LIMIT, KEY_NAME_MAX_LENGTH } from '../keys/key-service.js'
import type { KeySummary } from '../keys/key-service.js'
import type { KeyArea } from './access.js'
import type { SafeHtml } from './html.js'
import { html } from './html.js'
import type { Crumb } from './layout.js'
import { csrfInput, page } from './layout.js'
import type { ConsoleSession } from './sessions.js'

export const KEY_LIMIT_HINT = 'Revoke a key that is no longer used before creating another.'

export type KeyAction = 'revoke' | 'delete'

/** What the list page says after a redirect; a closed vocabulary read from the query string. */
export type Notice = 'revoked' | 'deleted'

function settingsName(area: KeyArea): string {
  return area.subAccount === null ? 'Agency settings' : 'Sub-account settings'
}

function crumbs(area: KeyArea, last?: string): Crumb[] {
  const trail: Crumb[] = [{ label: 'Console', href: '/console' }, { label: area.agency.name }]
  if (area.subAccount !== null) trail.push({ label: area.subAccount.name })
  trail.push({ label: settingsName(area) }, { label: 'API keys', href: area.keysPath })
  if (last !== undefined) trail.push({ label: last })
  return trail
}

/** The tenant a page is about, in words: "Acme" or "Acme West (a sub-account of Acme)". */
function tenantName(area: KeyArea): SafeHtml {
  return area.subAccount === null
    ? html`<strong>${area.agency.name}</strong>`
    : html`<strong>${area.subAccount.name}</strong>, a sub-account of <strong>${area.agency.name}</strong>`
}

function formatTime(iso: string | null, never: string): SafeHtml {
  if (iso === null) return html`<span>${never}</span>`
  const shown = `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`
  return html`<time datetime="${iso}">${shown}</time>`
}

function keyRow(area: KeyArea, key: KeySummary): SafeHtml {
  const actions =
    area.canManage &&
    html`${key.status === 'active' && html`<a href="${area.keysPath}/${key.id}/revoke" aria-label="Revoke ${key.name}">Revoke</a>`}<a href="${area.keysPath}/${key.id}/delete" aria-label="Delete ${key.name}">Delete</a>`
  return html`<tr>
  <th scope="row">${key.name}</th>
  <td class="scope">${key.scope}</td>
  <td><span class="status status-${key.status}">${key.status === 'active' ? 'Active' : 'Revoked'}</span></td>
  <td class="hint-code">${key.hint}</td>
  <td>${formatTime(key.createdAt, '—')}</td>
  <td>${formatTime(key.lastUsedAt, 'Never')}</td>
  <td>${formatTime(key.revokedAt, '—')}</td>
  ${area.canManage && html`<td class="actions-cell">${actions}</td>`}
</tr>`
}

function keyTable(area: KeyArea, keys: readonly KeySummary[]): SafeHtml {
  if (keys.length === 0) return html`<p>No API keys yet.</p>`
  return html`<div class="table-wrap" role="region" aria-labelledby="keys-heading" tabindex="0">
<table>
  <caption class="visually-hidden">API keys of ${area.subAccount?.name ?? area.agency.name}, newest first</caption>
  <thead><tr>
    <th scope="col">Name</th><th scope="col">Scope</th><th scope="col">Status</th><th scope="col">Key</th>
    <th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Revoked</th>
    ${area.canManage && html`<th scope="col">Actions</th>`}
  </tr></thead>
  <tbody>${keys.map((key) => keyRow(area, key))}</tbody>
</table>
</div>`
}

export interface CreateFormState {
  name?: string
  error?: string
}

function createForm(area: KeyArea, session: ConsoleSession, activeCount: number, state: CreateFormState): SafeHtml {
  if (!area.canManage) {
    return html`<div class="warning"><p>Only agency owners and admins can create, revoke or delete agency API keys.</p></div>`
  }
  const atLimit = activeCount >= ACTIVE_KEY_LIMIT
  const describedBy = state.error === undefined ? 'key-name-hint' : 'key-name-hint key-name-error'
  return html`<section aria-labelledby="create-heading">
<h2 id="create-heading">Create a key</h2>
${atLimit && state.error === undefined && html`<div class="warning"><p>Active API key limit reached for this scope. ${KEY_LIMIT_HINT}</p></div>`}
<form method="post" action="${area.keysPath}" class="panel" novalidate>
  ${csrfInput(session.csrfToken)}
  <div class="inline-form">
    <div class="field">
      <label for="key-name">Key name</label>
      <p class="hint" id="key-name-hint">Say what will use the key, for example “billing sync”. At most ${KEY_NAME_MAX_LENGTH} characters.</p>
      <input type="text" id="key-name" name="name" required maxlength="${KEY_NAME_MAX_LENGTH}" autocomplete="off" value="${state.name ?? ''}" aria-describedby="${describedBy}"${
        state.error !== undefined ? html` aria-invalid="true"` : ''
      }>
      ${state.error !== undefined && html`<p class="field-error" id="key-name-error" role="alert">${state.error}</p>`}
    </div>
    <button type="submit">Create key</button>
  </div>
</form>
<p class="hint">${activeCount} of ${ACTIVE_KEY_LIMIT} active keys in use.</p>
</section>`
}

const noticeText: Record<Notice, string> = {
  revoked: 'The key was revoked. It no longer authenticates any request.',
  deleted: 'The key was deleted, with its record.',
}

export interface KeysPageOptions {
  session: ConsoleSession
  area: KeyArea
  keys: readonly KeySummary[]
  notice?: Notice | undefined
  /** Set when not every gateway replica confirmed the change within the wait. */
  unconfirmed?: boolean
  form?: CreateFormState
}

export function keysPage(options: KeysPageOptions): string {
  const { session, area, keys } = options
  const activeCount = keys.filter((key) => key.status === 'active').length
  const scopeHelp =
    area.subAccount === null
      ? html`Agency keys reach the agency endpoints (<code>/v1/agency</code>, <code>/v1/agency/sub-accounts</code>) of ${tenantName(area)}.`
      : html`Sub-account keys reach the resource endpoints (<code>/v1/agents</code>, <code>/v1/contacts</code>, <code>/v1/calls</code>) of ${tenantName(area)}.`
  return page({
    title: `API keys · ${area.subAccount?.name ?? area.agency.name}`,
    session,
    crumbs: crumbs(area),
    body: html`<h1>API keys</h1>
<p class="lede">${settingsName(area)}. ${scopeHelp}</p>
${
  options.notice !== undefined &&
  html`<div class="notice" role="status"><p>${noticeText[options.notice]}</p>${
    options.unconfirmed === true && html`<p>Not every gateway replica confirmed the change in time; check the gateways’ health.</p>`
  }</div>`
}
${createForm(area, session, activeCount, options.form ?? {})}
<h2 id="keys-heading">Keys</h2>
${keyTable(area, keys)}`,
  })
}

export function createdKeyPage(session: ConsoleSession, area: KeyArea, key: KeySummary, plaintext: string | undefined): string {
  const body =
    plaintext === undefined
      ? html`<h1>Key created</h1>
<div class="warning" role="alert"><p>The key “${key.name}” was created, and its plaintext has already been shown once: it cannot be shown again.
If you did not copy it, revoke the key and create a new one.</p></div>
<p class="actions"><a class="button" href="${area.keysPath}">Back to API keys</a></p>`
      : html`<h1>Key created</h1>
<div class="warning" role="alert">
  <p><strong>Copy this key now. It will not be shown again.</strong></p>
  <p>Keep it on your servers, out of source control and out of client code. If it is lost, revoke it and create a new one.</p>
</div>
<div class="field">
  <label for="new-key">API key “${key.name}” (${key.scope})</label>
  <div class="key-box">
    <input type="text" id="new-key" readonly value="${plaintext}" spellcheck="false" autocomplete="off" aria-describedby="copy-status">
    <button type="button" class="button-secondary" data-copy-target="new-key" data-copy-status="copy-status" hidden>Copy</button>
  </div>
  <p id="copy-status" class="hint" role="status" aria-live="polite"></p>
</div>
<p class="actions"><a class="button" href="${area.keysPath}">Done: back to API keys</a></p>`
  return page({ title: 'Key created', session, crumbs: crumbs(area, 'Key created'), body })
}

const confirmText: Record<KeyAction, { title: string; explain: string; button: string }> = {
  revoke: {
    title: 'Revoke API key?',
    explain:
      'Revoking takes effect immediately: the next request that presents this key gets 401, on every gateway. The key’s record (name, scope, last use) is kept for audit. A revoked key cannot be restored.',
    button: 'Revoke key',
  },
  delete: {
    title: 'Delete API key?',
    explain:
      'Deleting takes effect immediately: the next request that presents this key gets 401, on every gateway. The key and its record are removed entirely. This cannot be undone.',
    button: 'Delete key',
  },
}

export function confirmPage(session: ConsoleSession, area: KeyArea, key: KeySummary, action: KeyAction): string {
  const text = confirmText[action]
  return page({
    title: text.title,
    session,
    crumbs: crumbs(area, action === 'revoke' ? 'Revoke' : 'Delete'),
    body: html`<h1>${text.title}</h1>
<div class="panel">
  <p>Key: <strong>${key.name}</strong> <span class="hint-code">${key.hint}</span> (${key.scope}, ${key.status === 'active' ? 'active' : 'revoked'})</p>
  <p>${text.explain}</p>
  <form method="post" action="${area.keysPath}/${key.id}/${action}">
    ${csrfInput(session.csrfToken)}
    <div class="actions"><button type="submit" class="button-danger">${text.button}</button><a href="${area.keysPath}">Cancel</a></div>
  </form>
</div>`,
  })
}
