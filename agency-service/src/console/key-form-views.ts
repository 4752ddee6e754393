/**
 * The key forms the console draws and the one-time display they lead to:
 * the create form (name, expiry, allowlist), the page that shows a new key
 * once (with its expiry, "never" included), the roll page (grace presets, and
 * the lifetime the new key keeps), and the addresses page (with its warning
 * step when the new list leaves out the address the key was last used from).
 * Each form carries a one-time form token (form-token.ts) and shows its
 * problems with form-errors.ts.
 */
import { MAX_ALLOWED_CIDRS } from '@scoped/shared/ip-address'
import { ACTIVE_KEY_LIMIT, KEY_NAME_MAX_LENGTH } from '../keys/key-service.js'
import type { KeySummary } from '../keys/key-service.js'
import type { KeyArea } from './access.js'
import type { FieldError } from './form-errors.js'
import { errorSummary, fieldAttributes, fieldMessages, formTitle } from './form-errors.js'
import { formTokenInput } from './form-token.js'
import type { SafeHtml } from './html.js'
import { html } from './html.js'
import { secretField } from './secret-field.js'
import { csrfInput, page } from './layout.js'
import type { ConsolePaths } from './paths.js'
import type { ConsoleSession } from './sessions.js'
import { crumbs, formatTime, keyLine } from './key-views.js'
import type { PermissionGridState } from './permission-grid.js'
import { permissionGrid, UNRESTRICTED_GRID } from './permission-grid.js'

export const KEY_LIMIT_HINT = 'Revoke a key that is no longer used before creating another.'

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

export interface CreateFormState {
  name?: string
  expires?: string
  expiresOn?: string
  allowedCidrs?: string
  /** The permission grid (permission-grid.ts); unrestricted when absent. */
  permissions?: PermissionGridState
  errors?: readonly FieldError[]
}

/** The create form (for those who may create keys), or why it is not there. */
export function createForm(
  area: KeyArea,
  session: ConsoleSession,
  activeCount: number,
  state: CreateFormState,
  /** The resources the key's scope can be given (the permission grid's rows). */
  resources: readonly string[] = [],
): SafeHtml {
  if (!area.canManage) {
    return html`<div class="warning"><p>Only agency owners and admins can create, revoke or delete agency API keys.</p></div>`
  }
  const errors = state.errors ?? []
  const atLimit = activeCount >= ACTIVE_KEY_LIMIT
  const expires = state.expires ?? 'never'
  return html`<section aria-labelledby="create-heading">
<h2 id="create-heading">Create a key</h2>
${atLimit && errors.length === 0 && html`<div class="warning"><p>Active API key limit reached for this scope. ${KEY_LIMIT_HINT}</p></div>`}
<form method="post" action="${area.keysPath}" class="panel" novalidate>
  ${csrfInput(session.csrfToken)}${formTokenInput()}
  <div class="field">
    <label for="key-name">Key name</label>
    <p class="hint" id="key-name-hint">Say what will use the key, for example “billing sync”. At most ${KEY_NAME_MAX_LENGTH} characters.</p>
    ${fieldMessages(errors, 'key-name')}
    <input type="text" id="key-name" name="name" required maxlength="${KEY_NAME_MAX_LENGTH}" autocomplete="off" value="${state.name ?? ''}"${fieldAttributes(errors, 'key-name', 'key-name-hint')}>
  </div>
  <div class="field-row">
    <div class="field">
      <label for="key-expires">Expires</label>
      <p class="hint" id="key-expires-hint">From that moment the key gets 401 on every request. It cannot be extended later.</p>
      ${fieldMessages(errors, 'key-expires')}
      <select id="key-expires" name="expires" data-shows-when-date="key-expires-on-field"${fieldAttributes(errors, 'key-expires', 'key-expires-hint')}>
        ${EXPIRY_PRESETS.map((preset) => html`<option value="${preset.value}"${preset.value === expires ? ' selected' : ''}>${preset.label}</option>`)}
      </select>
    </div>
    <div class="field" id="key-expires-on-field">
      <label for="key-expires-on">Expiry date and time (UTC)</label>
      <p class="hint" id="key-expires-on-hint">Used only when Expires is “On the date given”.</p>
      ${fieldMessages(errors, 'key-expires-on')}
      <input type="datetime-local" id="key-expires-on" name="expiresOn" value="${state.expiresOn ?? ''}"${fieldAttributes(errors, 'key-expires-on', 'key-expires-on-hint')}>
    </div>
  </div>
  <div class="field">
    <label for="key-cidrs">Allowed addresses</label>
    <p class="hint" id="key-cidrs-hint">IPv4 or IPv6 addresses or CIDR blocks (such as 203.0.113.0/24 or 2001:db8::/32), one per line, at most ${MAX_ALLOWED_CIDRS}. Leave empty to allow any address.</p>
    ${fieldMessages(errors, 'key-cidrs')}
    <textarea id="key-cidrs" name="allowedCidrs" rows="3" spellcheck="false" autocomplete="off"${fieldAttributes(errors, 'key-cidrs', 'key-cidrs-hint')}>${state.allowedCidrs ?? ''}</textarea>
  </div>
  ${permissionGrid(resources, state.permissions ?? UNRESTRICTED_GRID, errors)}
  <button type="submit">Create key</button>
</form>
<p class="hint">${activeCount} of ${ACTIVE_KEY_LIMIT} active keys in use. A rolled key in its grace period does not count.</p>
</section>`
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

/** The new key's expiry in a sentence, "never" included. */
function expirySentence(key: KeySummary): SafeHtml {
  return key.expiresAt === null
    ? html`<p id="new-key-expiry">This key never expires.</p>`
    : html`<p id="new-key-expiry">This key expires at ${formatTime(key.expiresAt, '—')}.</p>`
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
${secretField('new-key', html`API key “${key.name}” (${key.scope})`, plaintext)}
${expirySentence(key)}
${key.allowedCidrs.length > 0 && html`<p>It can be used only from ${key.allowedCidrs.map((cidr, index) => html`${index > 0 ? ', ' : ''}<code>${cidr}</code>`)}.</p>`}
<p class="actions"><a class="button" href="${area.keysPath}">Done: back to API keys</a></p>`
  return page({ paths, title: 'Key created', session, crumbs: crumbs(paths, area, 'Key created'), body })
}

/**
 * A duration in the largest whole unit it comes to: "30 days", "12 hours",
 * "90 minutes". A key's lifetime is read from two clocks (its creation is
 * Postgres's, its expiry the service's), so a few seconds either way are let go.
 */
export function durationText(ms: number): string {
  const units: Array<[number, string]> = [
    [86_400_000, 'day'],
    [3_600_000, 'hour'],
    [60_000, 'minute'],
  ]
  for (const [size, unit] of units) {
    const count = Math.round(ms / size)
    if (count >= 1 && Math.abs(ms - count * size) <= 5_000) return `${count} ${unit}${count === 1 ? '' : 's'}`
  }
  const seconds = Math.round(ms / 1000)
  return `${seconds} second${seconds === 1 ? '' : 's'}`
}

/** What the roll page says about the new key's lifetime: the old key's, counted from the roll (the key service carries it over). */
function lifetimeLine(key: KeySummary): SafeHtml {
  if (key.expiresAt === null) return html`<p id="roll-lifetime"><strong>The new key does not expire</strong>, like this one.</p>`
  const lifetime = Date.parse(key.expiresAt) - Date.parse(key.createdAt)
  return html`<p id="roll-lifetime"><strong>The new key expires ${durationText(lifetime)} after the roll</strong>: this key was made to last ${durationText(
    lifetime,
  )}, and the new one keeps that lifetime.</p>`
}

export function rollPage(
  paths: ConsolePaths,
  session: ConsoleSession,
  area: KeyArea,
  key: KeySummary,
  errors: readonly FieldError[] = [],
  chosen: string = DEFAULT_GRACE,
): string {
  return page({
    paths,
    title: formTitle('Roll API key?', errors),
    session,
    crumbs: crumbs(paths, area, 'Roll'),
    body: html`${errorSummary(errors)}<h1>Roll API key?</h1>
<div class="panel">
  ${keyLine(key)}
  <p>Rolling creates a new key with the same name, scope, tenant${key.allowedCidrs.length > 0 ? ', allowed addresses' : ''} and rate limit, and shows it once.</p>
  ${lifetimeLine(key)}
  <p>The old key keeps working for the grace period you choose (never past its own expiry), so you can move your traffic, then gets 401 on every gateway at that moment. During its grace period the old key does not count toward the limit of ${ACTIVE_KEY_LIMIT} and cannot be rolled again.</p>
  <form method="post" action="${area.keysPath}/${key.id}/roll">
    ${csrfInput(session.csrfToken)}${formTokenInput()}
    <fieldset${fieldAttributes(errors, `grace-${GRACE_PRESETS[0].value}`)}>
      <legend>Grace period for the old key</legend>
      ${fieldMessages(errors, `grace-${GRACE_PRESETS[0].value}`)}
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

export interface AddressesFormState {
  value?: string
  errors?: readonly FieldError[]
  /** The list leaves out the address the key was last used from: say so, and ask before saving. */
  excludes?: string
}

export function addressesPage(paths: ConsolePaths, session: ConsoleSession, area: KeyArea, key: KeySummary, state: AddressesFormState = {}): string {
  const value = state.value ?? key.allowedCidrs.join('\n')
  const errors = state.errors ?? []
  const warning =
    state.excludes !== undefined &&
    html`<div class="warning" id="exclusion-warning" role="alert" tabindex="-1" autofocus data-error-summary>
  <h2>This list would lock out the key’s current traffic</h2>
  <p>The key was last used from <code>${state.excludes}</code>${key.lastUsedAt !== null && html` (${formatTime(key.lastUsedAt, '—')})`}, which this list does not allow. Once saved, requests from that address get 403, on every gateway, from the next request on.</p>
  <p>Save anyway only if that traffic should stop; otherwise change the list.</p>
</div>`
  return page({
    paths,
    title: formTitle(state.excludes !== undefined ? 'Confirm allowed addresses' : 'Allowed addresses', errors),
    session,
    crumbs: crumbs(paths, area, 'Allowed addresses'),
    body: html`${errorSummary(errors)}${warning}<h1>Allowed addresses</h1>
<div class="panel">
  ${keyLine(key)}
  <form method="post" action="${area.keysPath}/${key.id}/addresses" novalidate>
    ${csrfInput(session.csrfToken)}${formTokenInput()}
    ${state.excludes !== undefined && html`<input type="hidden" name="confirmExcluded" value="${state.excludes}">`}
    <div class="field">
      <label for="key-cidrs">Allowed addresses</label>
      <p class="hint" id="key-cidrs-hint">IPv4 or IPv6 addresses or CIDR blocks, one per line, at most ${MAX_ALLOWED_CIDRS}. Leave empty to allow any address. A request from any other address gets 403, on every gateway, from the next request on.</p>
      ${fieldMessages(errors, 'key-cidrs')}
      <textarea id="key-cidrs" name="allowedCidrs" rows="5" spellcheck="false" autocomplete="off"${fieldAttributes(errors, 'key-cidrs', 'key-cidrs-hint')}>${value}</textarea>
    </div>
    <div class="actions"><button type="submit">${state.excludes !== undefined ? 'Save anyway' : 'Save addresses'}</button><a href="${area.keysPath}">Cancel</a></div>
  </form>
</div>`,
  })
}
