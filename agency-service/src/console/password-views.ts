/** The signed-in user's own password page: the current password, and the new one twice. */
import { MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH } from '@scoped/shared/passwords'
import type { SafeHtml } from './html.js'
import { html } from './html.js'
import { formTokenInput } from './form-token.js'
import { csrfInput, page } from './layout.js'
import type { ConsolePaths } from './paths.js'
import type { ConsoleSession } from './sessions.js'

export type PasswordField = 'currentPassword' | 'newPassword' | 'newPasswordAgain'

export interface PasswordPageState {
  error?: string
  errorField?: PasswordField
  changed?: boolean
}

function field(state: PasswordPageState, name: PasswordField, label: string, autocomplete: string, hint?: string): SafeHtml {
  const invalid = state.errorField === name
  const describedBy = [hint === undefined ? undefined : `${name}-hint`, invalid ? `${name}-error` : undefined].filter((id) => id !== undefined).join(' ')
  return html`<div class="field">
    <label for="${name}">${label}</label>
    ${hint !== undefined && html`<p class="hint" id="${name}-hint">${hint}</p>`}
    <input type="password" id="${name}" name="${name}" autocomplete="${autocomplete}" required maxlength="${MAX_PASSWORD_LENGTH}"${
      describedBy === '' ? '' : html` aria-describedby="${describedBy}"`
    }${invalid ? html` aria-invalid="true"` : ''}>
    ${invalid && html`<p class="field-error" id="${name}-error" role="alert">${state.error ?? ''}</p>`}
  </div>`
}

export function passwordPage(paths: ConsolePaths, session: ConsoleSession, state: PasswordPageState = {}): string {
  return page({
    paths,
    title: 'Your password',
    session,
    crumbs: [{ label: 'Console', href: paths.home }, { label: 'Your password' }],
    body: html`<h1>Your password</h1>
<p class="lede">Changing it signs you out everywhere else; this browser stays signed in.</p>
${state.changed === true && html`<div class="notice" role="status"><p>Your password was changed. Your other sessions have ended.</p></div>`}
<form method="post" action="${paths.accountPassword}" class="panel" novalidate>
  ${csrfInput(session.csrfToken)}
  ${formTokenInput()}
  ${field(state, 'currentPassword', 'Current password', 'current-password')}
  ${field(
    state,
    'newPassword',
    'New password',
    'new-password',
    `At least ${MIN_PASSWORD_LENGTH} characters. A password on the list of the most common ones is refused.`,
  )}
  ${field(state, 'newPasswordAgain', 'New password again', 'new-password')}
  <button type="submit">Change password</button>
</form>`,
  })
}
