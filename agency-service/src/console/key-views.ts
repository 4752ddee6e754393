/**
 * The key pages: the list with its create form (name, expiry, allowlist), the
 * one-time display of a new key, the roll page (grace presets), the
 * addresses page (the allowlist, changed later), the rate-limit page (the
 * key's own limit, or the route default), and the revoke and delete
 * confirmations.
 */
import { MAX_ALLOWED_CIDRS } from '@scoped/shared/ip-address'
import type { RateLimit } from '@scoped/shared/rate-limit'
import { MAX_BURST, MAX_RATE } from '@scoped/shared/rate-limit'
import { ACTIVE_KEY_LIMIT, KEY_NAME_MAX_LENGTH } from '../keys/key-service.js'
import type { KeySummary } from '../keys/key-service.js'
import type { KeyArea } from './access.js'
import type { SafeHtml } from './html.js'
import { html } from './html.js'
import type { Crumb } from './layout.js'
import { csrfInput, page } from './layout.js'
import { keyList } from './key-list.js'
import type { ConsolePaths } from './paths.js'
import type { ConsoleSession } from './sessions.js'

export const KEY_LIMIT_HINT = 'Revoke a key that is no longer used before creating another.'

export type KeyAction = 'revoke' | 'delete'

/** What the list page says after a redirect; a closed vocabulary read from the query string. */
export type Notice = 'revoked' | 'deleted' | 'addresses' | 'rate-limit' | 'default-rate-limit'

/** The expiry presets of the create form, in seconds (`date`: the date field instead). */
export const EXPIRY_PRESETS = [
  { value: 'never', label: 'Never', seconds: null },
  { value: '7d', label: 'In 7 days', seconds: 7 * 86_400 },
  { value: '30d', label: 'In 30 days', seconds: 30 * 86_400 },
  { value: '90d', label: 'In 90 days', seconds: 90 * 86_400 },
  { value: '365d', label: 'In 1 year', seconds: 365 * 86_400 },
  { value: 'date', label: 'On the date given', seconds: null },
] as const

/** The grace presets of a roll (at most 30 days, the service's bound). */
export const GRACE_PRESETS = [
  { value: '0', label: 'End the old key now' },
  { value: '3600', label: 'Keep the old key working for 1 hour' },
  { value: '86400', label: 'Keep the old key working for 24 hours' },
  { value: '604800', label: 'Keep the old key working for 7 days' },
] as const
export type GracePreset = (typeof GRACE_PRESETS)[number]['value']
export const DEFAULT_GRACE: GracePreset = '86400'

function settingsName(area: KeyArea): string {
  return area.subAccount === null ? 'Agency settings' : 'Sub-account settings'
}

export function crumbs(
  paths: ConsolePaths,
  area: KeyArea,
  last?: string,
  section: { label: string; href: string } = { label: 'API keys', href: area.keysPath },
): Crumb[] {
  // Every step is a link: the agency's and the sub-account's names lead to their settings.
  const trail: Crumb[] = [
    { label: 'Console', href: paths.home },
    { label: area.agency.name, href: paths.agencyKeys(area.agency.id) },
  ]
  if (area.subAccount !== null) trail.push({ label: area.subAccount.name, href: area.keysPath })
  trail.push(section)
  if (last !== undefined) trail.push({ label: last })
  return trail
}

/** The settings pages' tabs: API keys and, for those who may use them, the audit trail and the agency's members. */
export function settingsTabs(area: KeyArea, current: 'keys' | 'audit' | 'members' | 'invite'): SafeHtml {
  const tab = (label: string, href: string, here: boolean): SafeHtml =>
    here ? html`<li><a href="${href}" aria-current="page">${label}</a></li>` : html`<li><a href="${href}">${label}</a></li>`
  return html`<nav class="tabs" aria-label="${settingsName(area)}"><ul>${tab('API keys', area.keysPath, current === 'keys')}${
    area.canReadAudit && tab('Audit trail', area.auditPath, current === 'audit')
  }${area.membersPath !== null && tab('Members', area.membersPath, current === 'members')}${
    area.subAccount === null && area.canManage && tab('Invite a member', area.keysPath.replace(/\/keys$/, '/invitations/new'), current === 'invite')
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

/** A rate limit in plain words with its numbers: "100 requests per minute, bursts of 20". */
export function rateLimitText(limit: RateLimit): string {
  const perMinute = Math.round(limit.rate * 60 * 100) / 100
  const pace = limit.rate < 10 ? `${perMinute} requests per minute` : `${limit.rate} requests per second`
  return `${pace}, bursts of ${limit.burst}`
}

/** A key's limit in a list: its own, or the route's. */
export function keyRateLimitWords(limit: RateLimit | null): string {
  return limit === null ? 'Route default' : rateLimitText(limit)
}

/** Which field of the create form an error is about. */
export type CreateField = 'name' | 'expires' | 'allowedCidrs'

export interface CreateFormState {
  name?: string
  expires?: string
  expiresOn?: string
  allowedCidrs?: string
  error?: string
  /** The field the error is about (the name, unless said otherwise). */
  errorField?: CreateField
}

function fieldError(state: CreateFormState, field: CreateField, id: string): SafeHtml | undefined {
  if (state.error === undefined || (state.errorField ?? 'name') !== field) return undefined
  return html`<p class="field-error" id="${id}" role="alert">${state.error}</p>`
}

function invalidIf(state: CreateFormState, field: CreateField): SafeHtml | string {
  return state.error !== undefined && (state.errorField ?? 'name') === field ? html` aria-invalid="true"` : ''
}

function describedBy(state: CreateFormState, field: CreateField, hint: string, error: string): string {
  return state.error !== undefined && (state.errorField ?? 'name') === field ? `${hint} ${error}` : hint
}

function createForm(area: KeyArea, session: ConsoleSession, activeCount: number, state: CreateFormState): SafeHtml {
  if (!area.canManage) {
    return html`<div class="warning"><p>Only agency owners and admins can create, revoke or delete agency API keys.</p></div>`
  }
  const atLimit = activeCount >= ACTIVE_KEY_LIMIT
  const expires = state.expires ?? 'never'
  return html`<section aria-labelledby="create-heading">
<h2 id="create-heading">Create a key</h2>
${atLimit && state.error === undefined && html`<div class="warning"><p>Active API key limit reached for this scope. ${KEY_LIMIT_HINT}</p></div>`}
<form method="post" action="${area.keysPath}" class="panel" novalidate>
  ${csrfInput(session.csrfToken)}
  <div class="field">
    <label for="key-name">Key name</label>
    <p class="hint" id="key-name-hint">Say what will use the key, for example “billing sync”. At most ${KEY_NAME_MAX_LENGTH} characters.</p>
    <input type="text" id="key-name" name="name" required maxlength="${KEY_NAME_MAX_LENGTH}" autocomplete="off" value="${state.name ?? ''}" aria-describedby="${describedBy(
      state,
      'name',
      'key-name-hint',
      'key-name-error',
    )}"${invalidIf(state, 'name')}>
    ${fieldError(state, 'name', 'key-name-error')}
  </div>
  <div class="field-row">
    <div class="field">
      <label for="key-expires">Expires</label>
      <p class="hint" id="key-expires-hint">From that moment the key gets 401 on every request. It cannot be extended later.</p>
      <select id="key-expires" name="expires" aria-describedby="${describedBy(state, 'expires', 'key-expires-hint', 'key-expires-error')}"${invalidIf(state, 'expires')}>
        ${EXPIRY_PRESETS.map((preset) => html`<option value="${preset.value}"${preset.value === expires ? ' selected' : ''}>${preset.label}</option>`)}
      </select>
    </div>
    <div class="field">
      <label for="key-expires-on">Expiry date and time (UTC)</label>
      <p class="hint" id="key-expires-on-hint">Used when Expires is “On the date given”.</p>
      <input type="datetime-local" id="key-expires-on" name="expiresOn" value="${state.expiresOn ?? ''}" aria-describedby="key-expires-on-hint">
    </div>
  </div>
  ${fieldError(state, 'expires', 'key-expires-error')}
  <div class="field">
    <label for="key-cidrs">Allowed addresses</label>
    <p class="hint" id="key-cidrs-hint">IPv4 or IPv6 addresses or CIDR blocks (such as 203.0.113.0/24 or 2001:db8::/32), one per line, at most ${MAX_ALLOWED_CIDRS}. Leave empty to allow any address.</p>
    <textarea id="key-cidrs" name="allowedCidrs" rows="3" spellcheck="false" autocomplete="off" aria-describedby="${describedBy(
      state,
      'allowedCidrs',
      'key-cidrs-hint',
      'key-cidrs-error',
    )}"${invalidIf(state, 'allowedCidrs')}>${state.allowedCidrs ?? ''}</textarea>
    ${fieldError(state, 'allowedCidrs', 'key-cidrs-error')}
  </div>
  <button type="submit">Create key</button>
</form>
<p class="hint">${activeCount} of ${ACTIVE_KEY_LIMIT} active keys in use. A rolled key in its grace period does not count.</p>
</section>`
}

/** What the list says after a change, naming the key (`subject`: "web backend (…Moy3)"). */
function noticeText(notice: Notice, subject: string | null): string {
  const key = subject === null ? 'The key' : `Key ${subject}`
  switch (notice) {
    case 'revoked':
      return `${key} was revoked. It no longer authenticates any request.`
    case 'deleted':
      return `${key} was deleted, with its record.`
    case 'addresses':
      return `The allowed addresses of ${subject === null ? 'the key' : `key ${subject}`} were changed. The next request is judged by the new list, on every gateway.`
    case 'rate-limit':
      return `The rate limit of ${subject === null ? 'the key' : `key ${subject}`} was changed. The next request is counted against the new limit, on every gateway.`
    case 'default-rate-limit':
      return 'The default rate limit for new keys was changed. Keys created from now on get it; existing keys keep theirs.'
  }
}

/** Another place whose keys the user may see, for the switcher. */
export interface AreaLink {
  label: string
  href: string
  current: boolean
}

export interface KeysPageOptions {
  paths: ConsolePaths
  session: ConsoleSession
  area: KeyArea
  keys: readonly KeySummary[]
  /** The clock of relative times ("in 23 h"). */
  now: Date
  /** Whether revoked, expired and replaced keys are listed. */
  showAll?: boolean
  notice?: { notice: Notice; subject: string | null } | undefined
  /** The agency and the sub-accounts of it the user may see, for the switcher. */
  areas?: readonly AreaLink[]
  /** A sub-account's default rate limit for new keys (null: the route's); shown in a sub-account's settings. */
  defaultRateLimit?: RateLimit | null
  form?: CreateFormState
}

/** A menu of the agency's settings and its sub-accounts' (those the user may see); a <details>, so it works without script. */
function areaSwitcher(area: KeyArea, areas: readonly AreaLink[] | undefined): SafeHtml | false {
  if (areas === undefined || areas.length < 2) return false
  return html`<details class="switcher"><summary>Switch to another sub-account or the agency<span class="visually-hidden">, now ${
    area.subAccount?.name ?? area.agency.name
  }</span></summary><ul>${areas.map((link) =>
    link.current ? html`<li><a href="${link.href}" aria-current="page">${link.label}</a></li>` : html`<li><a href="${link.href}">${link.label}</a></li>`,
  )}</ul></details>`
}

export function keysPage(options: KeysPageOptions): string {
  const { paths, session, area, keys } = options
  const activeCount = keys.filter((key) => key.countsTowardLimit).length
  const scopeHelp =
    area.subAccount === null
      ? html`Agency keys reach the agency endpoints (<code>/v1/agency</code>, <code>/v1/agency/sub-accounts</code>) of ${tenantName(area)}.`
      : html`Sub-account keys reach the resource endpoints (<code>/v1/agents</code>, <code>/v1/contacts</code>, <code>/v1/calls</code>) of ${tenantName(area)}.`
  const list = keyList({ area, keys, now: options.now, showAll: options.showAll === true }, keyRateLimitWords)
  return page({
    paths,
    title: `API keys · ${area.subAccount?.name ?? area.agency.name}`,
    session,
    crumbs: crumbs(paths, area),
    body: html`<div class="page-head"><h1>API keys</h1>${area.canManage && html`<a class="button" href="#create-heading">Create key</a>`}</div>
<p class="lede">${settingsName(area)}. ${scopeHelp}</p>
${areaSwitcher(area, options.areas)}
${settingsTabs(area, 'keys')}
${options.notice !== undefined && html`<div class="notice" role="status"><p>${noticeText(options.notice.notice, options.notice.subject)}</p></div>`}
<h2 id="keys-heading" class="visually-hidden">Keys</h2>
${list}
${defaultRateLimitLine(area, options.defaultRateLimit)}
${createForm(area, session, activeCount, options.form ?? {})}`,
  })
}

/** A sub-account's default rate limit for new keys, with a link to change it for those who may. */
function defaultRateLimitLine(area: KeyArea, limit: RateLimit | null | undefined): SafeHtml | false {
  if (area.subAccount === null || limit === undefined) return false
  return html`<p id="default-rate-limit">Rate limit of new keys: <strong>${limit === null ? 'the route default' : rateLimitText(limit)}</strong>${
    area.canSetRateLimit && html` · <a href="${area.keysPath}/default-rate-limit">Change</a>`
  }</p>`
}

/** What the created-key page says about the key a roll replaced. */
export interface ReplacedKey {
  name: string
  hint: string
  /** When the old key stops working; at or before now: it already has. */
  expiresAt: string | null
  ended: boolean
  /** Not every gateway replica confirmed dropping what it cached about the old key. */
  unconfirmed?: boolean
}

export function createdKeyPage(
  paths: ConsolePaths,
  session: ConsoleSession,
  area: KeyArea,
  key: KeySummary,
  plaintext: string | undefined,
  replaced?: ReplacedKey,
): string {
  const rollNote =
    replaced !== undefined &&
    html`<div class="notice" role="status"><p>This key replaces “${replaced.name}” <span class="hint-code">${replaced.hint}</span>. ${
      replaced.ended ? html`The old key has stopped working.` : html`The old key keeps working until ${formatTime(replaced.expiresAt, '—')}, then gets 401.`
    }</p>${
      replaced.unconfirmed === true &&
      html`<p>Not every gateway replica confirmed the change in time; check the gateways’ health. Every replica refuses the old key within a second of its end all the same.</p>`
    }</div>`
  const expiry = key.expiresAt !== null && html`<p>This key expires at ${formatTime(key.expiresAt, '—')}.</p>`
  const body =
    plaintext === undefined
      ? html`<h1>Key created</h1>
<div class="warning" role="alert"><p>The key “${key.name}” was created, and its plaintext has already been shown once: it cannot be shown again.
If you did not copy it, revoke the key and create a new one.</p></div>
<p class="actions"><a class="button" href="${area.keysPath}">Back to API keys</a></p>`
      : html`<h1>Key created</h1>
${rollNote}
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
${expiry}
${key.allowedCidrs.length > 0 && html`<p>It can be used only from ${key.allowedCidrs.map((cidr, index) => html`${index > 0 ? ', ' : ''}<code>${cidr}</code>`)}.</p>`}
<p class="actions"><a class="button" href="${area.keysPath}">Done: back to API keys</a></p>`
  return page({ paths, title: 'Key created', session, crumbs: crumbs(paths, area, 'Key created'), body })
}

function keyLine(key: KeySummary): SafeHtml {
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
    ${csrfInput(session.csrfToken)}
    <div class="actions"><button type="submit" class="button-danger">${text.button}</button><a href="${area.keysPath}">Cancel</a></div>
  </form>
</div>`,
  })
}

export function rollPage(paths: ConsolePaths, session: ConsoleSession, area: KeyArea, key: KeySummary, error?: string, chosen: string = DEFAULT_GRACE): string {
  return page({
    paths,
    title: 'Roll API key?',
    session,
    crumbs: crumbs(paths, area, 'Roll'),
    body: html`<h1>Roll API key?</h1>
<div class="panel">
  ${keyLine(key)}
  <p>Rolling creates a new key with the same name, scope${key.allowedCidrs.length > 0 ? ', allowed addresses' : ''} and tenant, and shows it once; the new key does not expire. The old key keeps working for the grace period you choose (never past its own expiry), so you can move your traffic, then gets 401 on every gateway at that moment. During its grace period the old key does not count toward the limit of ${ACTIVE_KEY_LIMIT} and cannot be rolled again.</p>
  ${error !== undefined && html`<div class="alert" role="alert"><p>${error}</p></div>`}
  <form method="post" action="${area.keysPath}/${key.id}/roll">
    ${csrfInput(session.csrfToken)}
    <fieldset>
      <legend>Grace period for the old key</legend>
      ${GRACE_PRESETS.map(
        (preset) =>
          html`<div class="choice"><input type="radio" id="grace-${preset.value}" name="grace" value="${preset.value}"${preset.value === chosen ? ' checked' : ''}><label for="grace-${preset.value}">${preset.label}</label></div>`,
      )}
    </fieldset>
    <div class="actions"><button type="submit">Roll key</button><a href="${area.keysPath}">Cancel</a></div>
  </form>
</div>`,
  })
}

export function addressesPage(
  paths: ConsolePaths,
  session: ConsoleSession,
  area: KeyArea,
  key: KeySummary,
  state: { value?: string; error?: string } = {},
): string {
  const value = state.value ?? key.allowedCidrs.join('\n')
  return page({
    paths,
    title: 'Allowed addresses',
    session,
    crumbs: crumbs(paths, area, 'Allowed addresses'),
    body: html`<h1>Allowed addresses</h1>
<div class="panel">
  ${keyLine(key)}
  <form method="post" action="${area.keysPath}/${key.id}/addresses" novalidate>
    ${csrfInput(session.csrfToken)}
    <div class="field">
      <label for="key-cidrs">Allowed addresses</label>
      <p class="hint" id="key-cidrs-hint">IPv4 or IPv6 addresses or CIDR blocks, one per line, at most ${MAX_ALLOWED_CIDRS}. Leave empty to allow any address. A request from any other address gets 403, on every gateway, from the next request on.</p>
      <textarea id="key-cidrs" name="allowedCidrs" rows="5" spellcheck="false" autocomplete="off" aria-describedby="${
        state.error === undefined ? 'key-cidrs-hint' : 'key-cidrs-hint key-cidrs-error'
      }"${state.error !== undefined ? html` aria-invalid="true"` : ''}>${value}</textarea>
      ${state.error !== undefined && html`<p class="field-error" id="key-cidrs-error" role="alert">${state.error}</p>`}
    </div>
    <div class="actions"><button type="submit">Save addresses</button><a href="${area.keysPath}">Cancel</a></div>
  </form>
</div>`,
  })
}

/** Which field of the rate-limit form an error is about. */
export type RateLimitField = 'rate' | 'burst'

export interface RateLimitFormState {
  rate?: string
  burst?: string
  error?: string
  errorField?: RateLimitField
}

export function rateLimitPage(paths: ConsolePaths, session: ConsoleSession, area: KeyArea, key: KeySummary, state: RateLimitFormState = {}): string {
  const rate = state.rate ?? (key.rateLimit === null ? '' : String(key.rateLimit.rate))
  const burst = state.burst ?? (key.rateLimit === null ? '' : String(key.rateLimit.burst))
  const field = (name: RateLimitField, label: string, hint: string, value: string): SafeHtml => {
    const wrong = state.error !== undefined && state.errorField === name
    return html`<div class="field">
      <label for="key-${name}">${label}</label>
      <p class="hint" id="key-${name}-hint">${hint}</p>
      <input type="text" inputmode="decimal" id="key-${name}" name="${name}" value="${value}" autocomplete="off" aria-describedby="${
        wrong ? `key-${name}-hint key-${name}-error` : `key-${name}-hint`
      }"${wrong ? html` aria-invalid="true"` : ''}>
      ${wrong && html`<p class="field-error" id="key-${name}-error" role="alert">${state.error}</p>`}
    </div>`
  }
  return page({
    paths,
    title: 'Rate limit',
    session,
    crumbs: crumbs(paths, area, 'Rate limit'),
    body: html`<h1>Rate limit</h1>
<div class="panel">
  ${keyLine(key)}
  <p>Now: <strong>${key.rateLimit === null ? 'the route default' : rateLimitText(key.rateLimit)}</strong>.</p>
  <p>Without a limit of its own, the key gets each route’s default: the limit per key that the gateway’s operator set for that route. A limit of the key’s own replaces those on every route the key reaches, each route counted on its own; the limit on all of the tenant’s keys together stays the operator’s. A request over the limit is refused (429, “Too many requests”), on every gateway, from the next request on.</p>
  <p class="hint">For example, 2 requests per second with bursts of 20 lets the key send 20 requests at once after a quiet spell, then about 2 each second (120 requests per minute).</p>
  ${state.error !== undefined && state.errorField === undefined && html`<div class="alert" role="alert"><p>${state.error}</p></div>`}
  <form method="post" action="${area.keysPath}/${key.id}/rate-limit" novalidate>
    ${csrfInput(session.csrfToken)}
    <div class="field-row">
      ${field('rate', 'Requests per second', `How many requests the key may make each second, on average: above 0 (0.5 is one every 2 seconds), at most ${MAX_RATE}.`, rate)}
      ${field('burst', 'Burst', `How many requests it may send at once after a quiet spell: a whole number from 1 to ${MAX_BURST}.`, burst)}
    </div>
    <div class="actions"><button type="submit" name="action" value="set">Save rate limit</button>${
      key.rateLimit !== null && html`<button type="submit" name="action" value="clear" class="button-secondary">Use the route default</button>`
    }<a href="${area.keysPath}">Cancel</a></div>
  </form>
</div>`,
  })
}
