/**
 * The key list of a keys page: each key's state in words (active, rolling
 * with the time left, replaced by its successor, revoked, expired), a rolled
 * key right below the key that replaced it, one actions menu per row (a
 * <details>, so it works without script), relative times with the exact time
 * on hover, and the keys in a final state hidden until asked for.
 */
import type { KeySummary } from '../keys/key-service.js'
import type { KeyArea } from './access.js'
import type { SafeHtml } from './html.js'
import { html } from './html.js'
import { RATE_LIMIT_SETTERS } from './rate-limit-words.js'
import { relativeTime, spanText } from './relative-time.js'

/** What a key is, for a person reading the list. */
export type KeyState = 'active' | 'rolling' | 'replaced' | 'revoked' | 'expired'

export function keyState(key: KeySummary): KeyState {
  if (key.status === 'revoked') return 'revoked'
  if (key.replacedBy !== null) return key.status === 'active' ? 'rolling' : 'replaced'
  return key.status
}

/** States the list hides until "Show revoked" is chosen: nothing can be done with such a key but delete it. */
export function isFinal(state: KeyState): boolean {
  return state === 'revoked' || state === 'expired' || state === 'replaced'
}

/** The short hint that tells keys of the same name apart: "…Moy3". */
export function shortHint(hint: string): string {
  const at = hint.indexOf('…')
  return at === -1 ? hint : hint.slice(at)
}

/** A key as a person names it: "web backend (…Moy3)". */
export function keyLabel(key: Pick<KeySummary, 'name' | 'hint'>): string {
  return `${key.name} (${shortHint(key.hint)})`
}

/** The list newest first, with every rolled key placed right after the key that replaced it. */
export function groupedKeys(keys: readonly KeySummary[]): KeySummary[] {
  const byId = new Map(keys.map((key) => [key.id, key]))
  const placed = new Set<string>()
  const out: KeySummary[] = []
  for (const key of keys) {
    if (key.replacedBy !== null && byId.has(key.replacedBy)) continue
    for (let at: KeySummary | undefined = key; at !== undefined && !placed.has(at.id); at = at.replaces === null ? undefined : byId.get(at.replaces)) {
      placed.add(at.id)
      out.push(at)
    }
  }
  // A chain that loops back on itself (never written by the service) still shows every key.
  for (const key of keys) if (!placed.has(key.id)) out.push(key)
  return out
}

export interface KeyListView {
  area: KeyArea
  keys: readonly KeySummary[]
  now: Date
  /** Whether revoked, expired and replaced keys are shown. */
  showAll: boolean
}

function rowId(id: string): string {
  return `key-${id}`
}

function successorLink(view: KeyListView, key: KeySummary, shown: ReadonlySet<string>): SafeHtml | false {
  if (key.replacedBy === null) return false
  const successor = view.keys.find((candidate) => candidate.id === key.replacedBy)
  if (successor === undefined) return html`<span class="hint">Replaced by a deleted key</span>`
  const href = shown.has(successor.id) ? `#${rowId(successor.id)}` : `${view.area.keysPath}?show=all#${rowId(successor.id)}`
  return html`<span class="hint">Replaced by <a href="${href}" aria-label="Replaced by ${keyLabel(successor)}">${shortHint(successor.hint)}</a></span>`
}

const stateNames: Record<Exclude<KeyState, 'rolling'>, string> = { active: 'Active', replaced: 'Replaced', revoked: 'Revoked', expired: 'Expired' }

function stateCell(view: KeyListView, key: KeySummary, shown: ReadonlySet<string>): SafeHtml {
  const state = keyState(key)
  const { now } = view
  switch (state) {
    case 'rolling': {
      const left = key.expiresAt === null ? '' : ` — ends in ${spanText(new Date(key.expiresAt).getTime() - now.getTime())}`
      return html`<span class="status status-rolling">Rolling${left}</span><br>${successorLink(view, key, shown)}`
    }
    case 'replaced':
      return html`<span class="status status-replaced">Replaced</span><br>${successorLink(view, key, shown)}${
        key.expiresAt !== null && html`<br><span class="hint">ended ${relativeTime(key.expiresAt, now, '')}</span>`
      }`
    case 'revoked':
      return html`<span class="status status-revoked">Revoked</span>${key.revokedAt !== null && html`<br><span class="hint">${relativeTime(key.revokedAt, now, '')}</span>`}`
    case 'expired':
      return html`<span class="status status-expired">Expired</span>${key.expiresAt !== null && html`<br><span class="hint">${relativeTime(key.expiresAt, now, '')}</span>`}`
    case 'active':
      return html`<span class="status status-active">${stateNames.active}</span>${
        key.expiresAt !== null && html`<br><span class="hint">expires ${relativeTime(key.expiresAt, now, '')}</span>`
      }`
  }
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

/** A key's own rate limit in plain words, or the route default. */
export type RateLimitWords = (limit: KeySummary['rateLimit']) => string

function actionsMenu(area: KeyArea, key: KeySummary): SafeHtml {
  const label = keyLabel(key)
  const state = keyState(key)
  const base = `${area.keysPath}/${key.id}`
  const item = (action: string, text: string): SafeHtml => html`<li><a href="${base}/${action}" aria-label="${text} ${label}">${text}</a></li>`
  const live = state === 'active' || state === 'rolling'
  const rateLimit = area.canSetRateLimit ? item('rate-limit', 'Rate limit') : html`<li><span class="hint">Rate limit: ${RATE_LIMIT_SETTERS}</span></li>`
  return html`<details class="row-menu"><summary aria-label="Actions for ${label}">Actions</summary><ul>${state === 'active' && item('roll', 'Roll')}${
    live && item('addresses', 'Addresses')
  }${live && item('permissions', 'Permissions')}${live && rateLimit}${live && item('revoke', 'Revoke')}${item('delete', 'Delete')}</ul></details>`
}

function keyRow(view: KeyListView, key: KeySummary, shown: ReadonlySet<string>, rateLimitWords: RateLimitWords): SafeHtml {
  const { area, now } = view
  const predecessor = key.replacedBy !== null && shown.has(key.replacedBy)
  return html`<tr id="${rowId(key.id)}"${predecessor ? html` class="predecessor"` : ''}>
  <th scope="row" data-label="Key">${key.name}<br><span class="hint-code key-hint">${key.hint}</span></th>
  <td data-label="State">${stateCell(view, key, shown)}${permissionsLine(key)}</td>
  <td data-label="Last used">${relativeTime(key.lastUsedAt, now, 'Never')}${key.lastUsedIp !== null && html`<br><span class="hint">from <code>${key.lastUsedIp}</code></span>`}</td>
  <td data-label="Created">${relativeTime(key.createdAt, now, '—')}</td>
  <td data-label="Addresses">${addressesCell(key)}</td>
  <td data-label="Rate limit">${rateLimitWords(key.rateLimit)}</td>
  ${area.canManage && html`<td data-label="Actions" class="actions-cell">${actionsMenu(area, key)}</td>`}
</tr>`
}

function toggle(view: KeyListView, hidden: number): SafeHtml | false {
  const { area, showAll } = view
  if (showAll) return html`<p class="list-toggle"><a href="${area.keysPath}">Hide revoked, expired and replaced keys</a></p>`
  if (hidden === 0) return false
  return html`<p class="list-toggle"><a href="${area.keysPath}?show=all">Show revoked, expired and replaced keys (${hidden})</a></p>`
}

export function keyList(view: KeyListView, rateLimitWords: RateLimitWords): SafeHtml {
  const { area } = view
  const ordered = groupedKeys(view.keys)
  const visible = view.showAll ? ordered : ordered.filter((key) => !isFinal(keyState(key)))
  const shown = new Set(visible.map((key) => key.id))
  const hidden = ordered.length - visible.length
  if (visible.length === 0) {
    return html`<p>${view.keys.length === 0 ? 'No API keys yet.' : 'No active keys.'}</p>${toggle(view, hidden)}`
  }
  return html`<table class="key-table stacking">
  <caption class="visually-hidden">API keys of ${area.subAccount?.name ?? area.agency.name}, newest first, a rolled key below the key that replaced it</caption>
  <thead><tr>
    <th scope="col">Key</th><th scope="col">State</th><th scope="col">Last used</th><th scope="col">Created</th><th scope="col">Addresses</th><th scope="col">Rate limit</th>
    ${area.canManage && html`<th scope="col">Actions</th>`}
  </tr></thead>
  <tbody>${visible.map((key) => keyRow(view, key, shown, rateLimitWords))}</tbody>
</table>
${toggle(view, hidden)}`
}
