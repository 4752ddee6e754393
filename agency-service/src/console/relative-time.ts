/**
 * Times as people read them in a list: "in 23 h", "5 min ago", with the exact
 * time in UTC on hover and for assistive technology (`<time datetime title>`).
 * The clock is a parameter, so a page and its tests agree on "now".
 */
import type { SafeHtml } from './html.js'
import { html } from './html.js'

const UNITS: ReadonlyArray<{ ms: number; label: string }> = [
  { ms: 86_400_000, label: 'd' },
  { ms: 3_600_000, label: 'h' },
  { ms: 60_000, label: 'min' },
]

/** The span between two instants in its largest whole unit: "23 h", "5 min"; under a minute: "less than a minute". */
export function spanText(ms: number): string {
  const span = Math.abs(ms)
  for (const unit of UNITS) {
    if (span >= unit.ms) return `${Math.floor(span / unit.ms)} ${unit.label}`
  }
  return 'less than a minute'
}

/** "in 23 h" or "5 min ago" from `now`. */
export function relativeText(iso: string, now: Date): string {
  const delta = new Date(iso).getTime() - now.getTime()
  const span = spanText(delta)
  if (span === 'less than a minute') return delta >= 0 ? 'in less than a minute' : 'just now'
  return delta >= 0 ? `in ${span}` : `${span} ago`
}

/** The exact time as the console writes it: 2030-01-01 09:00 UTC. */
export function exactText(iso: string): string {
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`
}

/** A relative time, with the exact time on hover; `never` when there is none. */
export function relativeTime(iso: string | null, now: Date, never: string): SafeHtml {
  if (iso === null) return html`<span>${never}</span>`
  return html`<time datetime="${iso}" title="${exactText(iso)}">${relativeText(iso, now)}</time>`
}
