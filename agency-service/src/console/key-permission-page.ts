/**
 * A key's own permissions page (issue 30): what the key may do now, and the
 * permission grid to change it; after a change, a notice naming the key.
 */
import type { KeySummary } from '../keys/key-service.js'
import type { KeyArea } from './access.js'
import type { FieldError } from './form-errors.js'
import { errorSummary, formTitle } from './form-errors.js'
import { formTokenInput } from './form-token.js'
import type { SafeHtml } from './html.js'
import { html } from './html.js'
import { crumbs, keyLine } from './key-views.js'
import { csrfInput, page } from './layout.js'
import type { ConsolePaths } from './paths.js'
import type { PermissionGridState } from './permission-grid.js'
import { gridStateOf, permissionGrid } from './permission-grid.js'
import type { ConsoleSession } from './sessions.js'

export interface PermissionPageState {
  /** The grid as sent, when it is shown again with its problems. */
  grid?: PermissionGridState
  errors?: readonly FieldError[]
  /** The change was just saved (every gateway replica has it). */
  saved?: boolean
}

/** What the key may do now, in a sentence. */
function currentLine(key: KeySummary): SafeHtml {
  if (key.permissions === null) return html`<p id="current-permissions">Now: <strong>unrestricted</strong>, every permission of its scope.</p>`
  if (key.permissions.length === 0)
    return html`<p id="current-permissions">Now: <strong>restricted to no permission</strong>: every request on a resource’s routes gets 403.</p>`
  return html`<p id="current-permissions">Now: <strong>restricted to</strong> ${key.permissions.map((name, index) => html`${index > 0 ? ', ' : ''}<code>${name}</code>`)}.</p>`
}

export function permissionPage(
  paths: ConsolePaths,
  session: ConsoleSession,
  area: KeyArea,
  key: KeySummary,
  resources: readonly string[],
  state: PermissionPageState = {},
): string {
  const errors = state.errors ?? []
  const notice =
    state.saved === true &&
    html`<div class="notice" role="status" id="permissions-notice"><p>The permissions of “${key.name}” were changed. The next request with this key is judged by them, on every gateway.</p></div>`
  return page({
    paths,
    title: formTitle(`Permissions · ${key.name}`, errors),
    session,
    crumbs: crumbs(paths, area, 'Permissions'),
    body: html`${errorSummary(errors)}${notice}<h1>Permissions</h1>
<div class="panel">
  ${keyLine(key)}
  ${currentLine(key)}
  ${
    resources.length === 0
      ? html`<p>The routes of this key’s scope name no resource, so there is nothing to restrict it to.</p>`
      : html`<form method="post" action="${area.keysPath}/${key.id}/permissions" novalidate>
    ${csrfInput(session.csrfToken)}${formTokenInput()}
    ${permissionGrid(resources, state.grid ?? gridStateOf(key.permissions), errors)}
    <div class="actions"><button type="submit">Save permissions</button><a href="${area.keysPath}">Back to API keys</a></div>
  </form>`
  }
</div>`,
  })
}
