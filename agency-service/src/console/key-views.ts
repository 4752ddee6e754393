/**
 * The key pages: the list with its create form (the form itself, the
 * one-time display, the roll and addresses pages: key-form-views.ts), the
 * rate-limit page (the key's own limit, or the route default), and the
 * revoke and delete confirmations.
 */
import type { RateLimit } from '@scoped/shared/rate-limit'
import { MAX_BURST, MAX_RATE } from '@scoped/shared/rate-limit'
import type { KeySummary } from '../keys/key-service.js'
import type { KeyArea } from './access.js'
import type { FieldError } from './form-errors.js'
import { errorSummary, fieldAttributes, fieldMessages, formTitle } from './form-errors.js'
import { formTokenInput } from './form-token.js'
import type { CreateFormState } from './key-form-views.js'
import { createForm } from './key-form-views.js'
import type { SafeHtml } from './html.js'
import { html } from './html.js'
import type { Crumb } from './layout.js'
import { csrfInput, page } from './layout.js'
import type { ConsolePaths } from './paths.js'
import type { ConsoleSession } from './sessions.js'

export type KeyAction = 'revoke' | 'delete'

/** What the list page says after a redirect; a closed vocabulary read from the query string. */
export type Notice = 'revoked' | 'deleted' | 'addresses' | 'rate-limit' | 'default-rate-limit'

function settingsName(area: KeyArea): string {
  return area.subAccount === null ? 'Agency settings' : 'Sub-account settings'
}

export function crumbs(
  paths: ConsolePaths,
  area: KeyArea,
  last?: string,
  section: { label: string; href: string } = { label: 'API keys', href: area.keysPath },
): Crumb[] {
  const trail: Crumb[] = [{ label: 'Console', href: paths.home }, { label: area.agency.name }]
  if (area.subAccount !== null) trail.push({ label: area.subAccount.name })
  trail.push({ label: settingsName(area) }, section)
  if (last !== undefined) trail.push({ label: last })
  return trail
}

/** The settings pages' tabs: API keys and, for those who may use them, the audit trail and the agency's members. */
export function settingsTabs(area: KeyArea, current: 'keys' | 'audit' | 'usage' | 'members' | 'webhooks'): SafeHtml {
  const tab = (label: string, href: string, here: boolean): SafeHtml =>
    here ? html`<li><a href="${href}" aria-current="page">${label}</a></li>` : html`<li><a href="${href}">${label}</a></li>`
  return html`<nav class="tabs" aria-label="${settingsName(area)}"><ul>${tab('API keys', area.keysPath, current === 'keys')}${
    area.canReadAudit && tab('Audit trail', area.auditPath, current === 'audit')
  }${area.canReadAudit && tab('Usage', area.usagePath, current === 'usage')}${area.membersPath !== null && tab('Members', area.membersPath, current === 'members')}${
    area.webhooksPath !== null && tab('Webhooks', area.webhooksPath, current === 'webhooks')
  }</ul></nav>`
}

/** The tenant a page is about, in words: "Acme" or "Acme West (a sub-account of Acme)". */
export function tenantName(area: KeyArea): SafeHtml {
  return area.subAccount === null
    ? html`<strong>${area.agency.name}</strong>`
    : html`<strong>${area.subAccount.name}</strong>, a sub-account of <strong>${area.agency.name}</strong>`
}

export function formatTime(iso: string | null, never: string): SafeHtml {
  if (iso === null) return html`<span>${never}</span>`
  const shown = `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`
  return html`<time datetime="${iso}">${shown}</time>`
}

const statusNames = { active: 'Active', revoked: 'Revoked', expired: 'Expired' } as const

function statusCell(key: KeySummary): SafeHtml {
  const badge = html`<span class="status status-${key.status}">${statusNames[key.status]}</span>${permissionsLine(key)}`
  if (key.status !== 'active') return badge
  if (key.replacedBy !== null) return html`${badge}<br><span class="hint">Replaced; works until ${formatTime(key.expiresAt, '—')}</span>`
  return badge
}

/** A restricted key (issue 30): "Restricted" and its permissions; nothing for an unrestricted one. */
function permissionsLine(key: KeySummary): SafeHtml | false {
  if (key.permissions === null) return false
  const names = key.permissions.length === 0 ? html`no permissions` : key.permissions.map((name, index) => html`${index > 0 ? ', ' : ''}<code>${name}</code>`)
  return html`<br><span class="hint">Restricted: ${names}</span>`
}

function addressesCell(key: KeySummary): SafeHtml {
  if (key.allowedCidrs.length === 0) return html`<span>Any</span>`
  return html`<ul class="plain-list">${key.allowedCidrs.map((cidr) => html`<li><code>${cidr}</code></li>`)}</ul>`
}

/** A key's own rate limit in words: "50 per second, bursts of 100". */
export function rateLimitText(limit: RateLimit): string {
  return `${limit.rate} per second, bursts of ${limit.burst}`
}

function rateLimitCell(key: KeySummary): SafeHtml {
  return key.rateLimit === null ? html`<span>Route default</span>` : html`<span>${rateLimitText(key.rateLimit)}</span>`
}

function keyRow(area: KeyArea, key: KeySummary): SafeHtml {
  const active = key.status === 'active'
  const actions =
    area.canManage &&
    html`${active && key.replacedBy === null && html`<a href="${area.keysPath}/${key.id}/roll" aria-label="Roll ${key.name}">Roll</a>`}${
      active && html`<a href="${area.keysPath}/${key.id}/addresses" aria-label="Addresses of ${key.name}">Addresses</a>`
    }${active && html`<a href="${area.keysPath}/${key.id}/permissions" aria-label="Permissions of ${key.name}">Permissions</a>`}${active && area.canSetRateLimit && html`<a href="${area.keysPath}/${key.id}/rate-limit" aria-label="Rate limit of ${key.name}">Rate limit</a>`}${active && html`<a href="${area.keysPath}/${key.id}/revoke" aria-label="Revoke ${key.name}">Revoke</a>`}<a href="${area.keysPath}/${key.id}/delete" aria-label="Delete ${key.name}">Delete</a>`
  return html`<tr>
  <th scope="row">${key.name}<br><span class="hint-code key-hint">${key.hint}</span></th>
  <td class="scope">${key.scope}</td>
  <td>${statusCell(key)}</td>
  <td>${formatTime(key.createdAt, '—')}</td>
  <td>${formatTime(key.lastUsedAt, 'Never')}${key.lastUsedIp !== null && html`<br><span class="hint">from <code>${key.lastUsedIp}</code></span>`}</td>
  <td>${formatTime(key.expiresAt, 'Never')}</td>
  <td>${addressesCell(key)}</td>
  <td>${rateLimitCell(key)}</td>
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
    <th scope="col">Name</th><th scope="col">Scope</th><th scope="col">Status</th>
    <th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Expires</th><th scope="col">Addresses</th><th scope="col">Rate limit</th><th scope="col">Revoked</th>
    ${area.canManage && html`<th scope="col">Actions</th>`}
  </tr></thead>
  <tbody>${keys.map((key) => keyRow(area, key))}</tbody>
</table>
</div>`
}

const noticeText: Record<Notice, string> = {
  revoked: 'The key was revoked. It no longer authenticates any request.',
  deleted: 'The key was deleted, with its record.',
  addresses: 'The key’s allowed addresses were changed. The next request is judged by the new list, on every gateway.',
  'rate-limit': 'The key’s rate limit was changed. The next request is counted against the new limit, on every gateway.',
  'default-rate-limit': 'The default rate limit for new keys was changed. Keys created from now on get it; existing keys keep theirs.',
}

export interface KeysPageOptions {
  paths: ConsolePaths
  session: ConsoleSession
  area: KeyArea
  keys: readonly KeySummary[]
  notice?: Notice | undefined
  /** A sub-account's default rate limit for new keys (null: the route's); shown in a sub-account's settings. */
  defaultRateLimit?: RateLimit | null
  /** Set when not every gateway replica confirmed the change within the wait. */
  unconfirmed?: boolean
  form?: CreateFormState
  /** The resources the area's keys can be given permissions on (the create form's grid). */
  permissionResources?: readonly string[]
}

export function keysPage(options: KeysPageOptions): string {
  const { paths, session, area, keys } = options
  const activeCount = keys.filter((key) => key.countsTowardLimit).length
  const scopeHelp =
    area.subAccount === null
      ? html`Agency keys reach the agency endpoints (<code>/v1/agency</code>, <code>/v1/agency/sub-accounts</code>) of ${tenantName(area)}.`
      : html`Sub-account keys reach the resource endpoints (<code>/v1/agents</code>, <code>/v1/contacts</code>, <code>/v1/calls</code>) of ${tenantName(area)}.`
  return page({
    paths,
    title: formTitle(`API keys · ${area.subAccount?.name ?? area.agency.name}`, options.form?.errors ?? []),
    session,
    crumbs: crumbs(paths, area),
    body: html`${errorSummary(options.form?.errors ?? [])}<h1>API keys</h1>
<p class="lede">${settingsName(area)}. ${scopeHelp}</p>
${settingsTabs(area, 'keys')}
${
  options.notice !== undefined &&
  html`<div class="notice" role="status"><p>${noticeText[options.notice]}</p>${
    options.unconfirmed === true && html`<p>Not every gateway replica confirmed the change in time; check the gateways’ health.</p>`
  }</div>`
}
${createForm(area, session, activeCount, options.form ?? {}, options.permissionResources)}
${defaultRateLimitLine(area, options.defaultRateLimit)}
<h2 id="keys-heading">Keys</h2>
${keyTable(area, keys)}`,
  })
}

/** A sub-account's default rate limit for new keys, with a link to change it for those who may. */
function defaultRateLimitLine(area: KeyArea, limit: RateLimit | null | undefined): SafeHtml | false {
  if (area.subAccount === null || limit === undefined) return false
  return html`<p id="default-rate-limit">Rate limit of new keys: <strong>${limit === null ? 'the route default' : rateLimitText(limit)}</strong>${
    area.canSetRateLimit && html` · <a href="${area.keysPath}/default-rate-limit">Change</a>`
  }</p>`
}

export function keyLine(key: KeySummary): SafeHtml {
  return html`<p>Key: <strong>${key.name}</strong> <span class="hint-code">${key.hint}</span> (${key.scope}, ${key.status})</p>`
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

export function confirmPage(paths: ConsolePaths, session: ConsoleSession, area: KeyArea, key: KeySummary, action: KeyAction): string {
  const text = confirmText[action]
  return page({
    paths,
    title: text.title,
    session,
    crumbs: crumbs(paths, area, action === 'revoke' ? 'Revoke' : 'Delete'),
    body: html`<h1>${text.title}</h1>
<div class="panel">
  ${keyLine(key)}
  <p>${text.explain}</p>
  <form method="post" action="${area.keysPath}/${key.id}/${action}">
    ${csrfInput(session.csrfToken)}${formTokenInput()}
    <div class="actions"><button type="submit" class="button-danger">${text.button}</button><a href="${area.keysPath}">Cancel</a></div>
  </form>
</div>`,
  })
}

export interface RateLimitFormState {
  rate?: string
  burst?: string
  errors?: readonly FieldError[]
}

export function rateLimitPage(paths: ConsolePaths, session: ConsoleSession, area: KeyArea, key: KeySummary, state: RateLimitFormState = {}): string {
  const rate = state.rate ?? (key.rateLimit === null ? '' : String(key.rateLimit.rate))
  const burst = state.burst ?? (key.rateLimit === null ? '' : String(key.rateLimit.burst))
  const errors = state.errors ?? []
  const field = (name: 'rate' | 'burst', label: string, hint: string, value: string): SafeHtml => html`<div class="field">
      <label for="key-${name}">${label}</label>
      <p class="hint" id="key-${name}-hint">${hint}</p>
      ${fieldMessages(errors, `key-${name}`)}
      <input type="text" inputmode="decimal" id="key-${name}" name="${name}" value="${value}" autocomplete="off"${fieldAttributes(errors, `key-${name}`, `key-${name}-hint`)}>
    </div>`
  return page({
    paths,
    title: formTitle('Rate limit', errors),
    session,
    crumbs: crumbs(paths, area, 'Rate limit'),
    body: html`${errorSummary(errors)}<h1>Rate limit</h1>
<div class="panel">
  ${keyLine(key)}
  <p>Now: <strong>${key.rateLimit === null ? 'the route default' : rateLimitText(key.rateLimit)}</strong>.</p>
  <p>The route default is the per-key limit the gateway operator set for each route. A limit of the key’s own replaces it on every route this key reaches, each route counted on its own; the limits on all of the tenant's keys together stay the operator's. A request over the limit gets 429, on every gateway, from the next request on.</p>
  <form method="post" action="${area.keysPath}/${key.id}/rate-limit" novalidate>
    ${csrfInput(session.csrfToken)}${formTokenInput()}
    <div class="field-row">
      ${field('rate', 'Requests per second', `Tokens added to the key’s bucket each second: above 0 (0.5 is one every 2 seconds), at most ${MAX_RATE}.`, rate)}
      ${field('burst', 'Burst', `The most requests the key may send at once: a whole number from 1 to ${MAX_BURST}.`, burst)}
    </div>
    <div class="actions"><button type="submit" name="action" value="set">Save rate limit</button>${
      key.rateLimit !== null && html`<button type="submit" name="action" value="clear" class="button-secondary">Use the route default</button>`
    }<a href="${area.keysPath}">Cancel</a></div>
  </form>
</div>`,
  })
}
