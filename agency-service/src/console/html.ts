/**
 * HTML built by one tagged template, `html`, that escapes every interpolated
 * value unless it is itself the product of `html` (SafeHtml). There is no
 * other way to put text into a page, so a key name, an email or an error
 * message can never become markup. Attribute values are always quoted in the
 * templates, and the escaping covers both quote characters.
 */

const ESCAPES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (character) => ESCAPES[character] ?? character)
}

/** Markup that is already safe: made by `html`, never from a plain string. */
export class SafeHtml {
  readonly #markup: string

  /** Only `html` and `joinHtml` construct it; the token keeps other code from wrapping a raw string. */
  constructor(markup: string, token: symbol) {
    if (token !== constructionToken) throw new Error('SafeHtml is made by the html template only')
    this.#markup = markup
  }

  toString(): string {
    return this.#markup
  }
}

const constructionToken = Symbol('SafeHtml')

/** What a template may interpolate: text (escaped), numbers, safe markup, lists of them; `false`, null and undefined render nothing. */
export type HtmlValue = SafeHtml | string | number | false | null | undefined | readonly HtmlValue[]

function render(value: HtmlValue): string {
  if (value === false || value === null || value === undefined) return ''
  if (value instanceof SafeHtml) return value.toString()
  if (Array.isArray(value)) return value.map((item: HtmlValue) => render(item)).join('')
  return escapeHtml(String(value))
}

export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): SafeHtml {
  let out = strings[0] ?? ''
  for (let i = 0; i < values.length; i++) out += render(values[i]) + (strings[i + 1] ?? '')
  return new SafeHtml(out, constructionToken)
}
