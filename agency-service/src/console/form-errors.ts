/**
 * How a console form shows what is wrong with it: a summary at the top of the
 * page that takes focus (every problem, each a link to its field), and beside
 * each field its own messages, the field marked `aria-invalid` and described
 * by them. The field of a problem is decided in code (a refusal's field name,
 * mapped: key-forms.ts), never read back from a message's wording.
 */
import type { SafeHtml } from './html.js'
import { html } from './html.js'

/** One problem of a form: the id of the input it is about (none: the form as a whole, such as the key's state), and what to do. */
export interface FieldError {
  field?: string
  message: string
}

/** A form refused before anything was changed, with every problem found. */
export class FormRefusal extends Error {
  constructor(readonly errors: readonly FieldError[]) {
    super(errors.map((error) => error.message).join('; '))
  }
}

/** The page title of a form, `Error: ` first when it is shown again with problems. */
export function formTitle(title: string, errors: readonly FieldError[]): string {
  return errors.length > 0 ? `Error: ${title}` : title
}

/** The summary at the top: focused when the page loads (autofocus, and the console's script for browsers that skip it). */
export function errorSummary(errors: readonly FieldError[]): SafeHtml | false {
  if (errors.length === 0) return false
  return html`<div class="error-summary alert" role="alert" aria-labelledby="error-summary-title" tabindex="-1" autofocus data-error-summary>
  <h2 id="error-summary-title">There is a problem</h2>
  <ul>${errors.map((error) => (error.field === undefined ? html`<li>${error.message}</li>` : html`<li><a href="#${error.field}">${error.message}</a></li>`))}</ul>
</div>`
}

/** The attributes of an input: described by its hint and, when wrong, its messages, and marked invalid. */
export function fieldAttributes(errors: readonly FieldError[], field: string, hint?: string): SafeHtml {
  const wrong = errors.some((error) => error.field === field)
  const describedBy = [hint, wrong ? `${field}-error` : undefined].filter((id) => id !== undefined).join(' ')
  return html`${describedBy !== '' && html` aria-describedby="${describedBy}"`}${wrong && html` aria-invalid="true"`}`
}

/** The messages beside a field, one per problem. */
export function fieldMessages(errors: readonly FieldError[], field: string): SafeHtml | false {
  const mine = errors.filter((error) => error.field === field)
  if (mine.length === 0) return false
  if (mine.length === 1) return html`<p class="field-error" id="${field}-error">${mine[0]!.message}</p>`
  return html`<ul class="field-error" id="${field}-error">${mine.map((error) => html`<li>${error.message}</li>`)}</ul>`
}
