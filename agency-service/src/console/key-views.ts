/**
 * The key pages: the list with its create form (the form itself, the
 * one-time display, the roll and addresses pages: key-form-views.ts), the
 * rate-limit page (the key's own limit, or the route default), and the
 * revoke and delete confirmations.
 */
import type { RateLimit } from '@scoped/shared/rate-limit'
import { MAX_BURST, MAX_RATE } from '@scoped/shared/rate-limit'
import type { KeySummary } from '../keys/key-service.js'
import type { RouteRateLimits } from '../keys/permission-catalog.js'
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
import { keyList } from './key-list.js'
import type { ConsolePaths } from './paths.js'
import { RATE_LIMIT_SETTERS, rateLimitText, routeDefaultLine, sharedLimitsLine } from './rate-limit-words.js'
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
export function settingsTabs(area: KeyArea, current: 'keys' | 'audit' | 'usage' | 'members' | 'webhooks' | 'invite'): SafeHtml {
  const tab = (label: string, href: string, here: boolean): SafeHtml =>
    here ? html`<li><a href="${href}" aria-current="page">${label}</a></li>` : html`<li><a href="${href}">${label}</a></li>`
  return html`<nav class="tabs" aria-label="${settingsName(area)}"><ul>${tab('API keys', area.keysPath, current === 'keys')}${
    area.canReadAudit && tab('Audit trail', area.auditPath, current === 'audit')
  }${area.canReadAudit && tab('Usage', area.usagePath, current === 'usage')}${area.membersPath !== null && tab('Members', area.membersPath, current === 'members')}${
    area.webhooksPath !== null && tab('Webhooks', area.webhooksPath, current === 'webhooks')
  }${
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

/** A key's limit in a list: its own, or the route's. */
export function keyRateLimitWords(limit: RateLimit | null): string {
  return limit === null ? 'Route default' : rateLimitText(limit)
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
  /** The rate limits of the routes of the area's scope (the routes file's), which "Route default" in the list stands for. */
  routeLimits?: readonly RouteRateLimits[]
  form?: CreateFormState
  /** The resources the area's keys can be given permissions on (the create form's grid). */
  permissionResources?: readonly string[]
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
    title: formTitle(`API keys · ${area.subAccount?.name ?? area.agency.name}`, options.form?.errors ?? []),
    session,
    crumbs: crumbs(paths, area),
    body: html`${errorSummary(options.form?.errors ?? [])}<div class="page-head"><h1>API keys</h1>${area.canManage && html`<a class="button" href="#create-heading">Create key</a>`}</div>
<p class="lede">${settingsName(area)}. ${scopeHelp}</p>
${areaSwitcher(area, options.areas)}
${settingsTabs(area, 'keys')}
${options.notice !== undefined && html`<div class="notice" role="status"><p>${noticeText(options.notice.notice, options.notice.subject)}</p></div>`}
<h2 id="keys-heading" class="visually-hidden">Keys</h2>
${list}
${options.routeLimits !== undefined && routeDefaultLine(options.routeLimits)}
${defaultRateLimitLine(area, options.defaultRateLimit)}
${createForm(area, session, activeCount, options.form ?? {}, options.permissionResources)}`,
  })
}

/** A sub-account's default rate limit for new keys, with a link to change it for those who may. */
function defaultRateLimitLine(area: KeyArea, limit: RateLimit | null | undefined): SafeHtml | false {
  if (area.subAccount === null || limit === undefined) return false
  return html`<p id="default-rate-limit">Rate limit of new keys: <strong>${limit === null ? 'the route default' : rateLimitText(limit)}</strong>${
    area.canSetRateLimit ? html` · <a href="${area.keysPath}/default-rate-limit">Change</a>` : html` <span class="hint">(${RATE_LIMIT_SETTERS})</span>`
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

export function rateLimitPage(
  paths: ConsolePaths,
  session: ConsoleSession,
  area: KeyArea,
  key: KeySummary,
  routes: readonly RouteRateLimits[],
  state: RateLimitFormState = {},
): string {
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
  ${routeDefaultLine(routes)}
  ${sharedLimitsLine(area, routes)}
  <p>Without a limit of its own, the key gets each route’s default: the limit per key that the gateway’s operator set for that route. A limit of the key’s own replaces those on every route the key reaches, each route counted on its own; the limit on all of the tenant’s keys together stays the operator’s. A request over the limit is refused (429, “Too many requests”), on every gateway, from the next request on.</p>
  <p class="hint">For example, 2 requests per second with bursts of 20 lets the key send 20 requests at once after a quiet spell, then about 2 each second (120 requests per minute).</p>
  <form method="post" action="${area.keysPath}/${key.id}/rate-limit" novalidate>
    ${csrfInput(session.csrfToken)}${formTokenInput()}
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
