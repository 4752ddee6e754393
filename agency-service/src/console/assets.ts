/**
 * The console's stylesheet and its one script, served as files under
 * /console/assets (the Content-Security-Policy allows no inline script or
 * style). They live in this module rather than beside it so the compiled
 * service (dist/) serves them without a copy step.
 */
import { createHash } from 'node:crypto'
import type { FastifyInstance } from 'fastify'

const stylesheet = `
:root { color-scheme: light; --ink: #1b1f24; --muted: #4a5360; --line: #c9ced6; --surface: #f5f7fa;
  --accent: #0b57d0; --accent-dark: #08409a; --danger: #b3261e; --danger-dark: #8c1d18; --focus: #ffbf47; }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  color: var(--ink); background: #fff; }
a { color: var(--accent); text-underline-offset: 2px; }
a:hover { color: var(--accent-dark); }
:focus-visible { outline: 3px solid var(--ink); outline-offset: 2px; box-shadow: 0 0 0 6px var(--focus); }
.skip-link { position: absolute; left: 0.5rem; top: -3rem; padding: 0.5rem 1rem; background: var(--ink); color: #fff; z-index: 10; }
.skip-link:focus { top: 0.5rem; }
.visually-hidden { position: absolute !important; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
.site-header { display: flex; flex-wrap: wrap; gap: 1rem; align-items: center; justify-content: space-between;
  padding: 0.75rem 1.5rem; background: var(--ink); color: #fff; }
.site-header a { color: #fff; }
.brand { font-weight: 700; text-decoration: none; }
.account { display: flex; gap: 1rem; align-items: center; }
.account form { margin: 0; }
main { max-width: 68rem; margin: 0 auto; padding: 1.5rem; }
h1 { font-size: 1.75rem; margin: 0.5rem 0 0.25rem; }
h2 { font-size: 1.25rem; margin: 2rem 0 0.75rem; }
.lede { color: var(--muted); margin-top: 0; }
.breadcrumbs ol { list-style: none; display: flex; flex-wrap: wrap; gap: 0.25rem; margin: 0; padding: 0; color: var(--muted); }
.breadcrumbs li + li::before { content: "/"; padding-right: 0.25rem; }
.panel { border: 1px solid var(--line); border-radius: 8px; padding: 1rem 1.25rem; background: var(--surface); }
.panel > :first-child { margin-top: 0; }
.panel > :last-child { margin-bottom: 0; }
label { display: block; font-weight: 600; margin-bottom: 0.25rem; }
.hint { color: var(--muted); margin: 0 0 0.5rem; font-size: 0.9375rem; }
input[type="text"], input[type="email"], input[type="password"] { font: inherit; padding: 0.5rem 0.625rem; border: 2px solid #6b7480;
  border-radius: 6px; width: 100%; max-width: 28rem; background: #fff; color: var(--ink); }
input[aria-invalid="true"] { border-color: var(--danger); }
.field { margin-bottom: 1rem; }
.field-error { color: var(--danger); font-weight: 600; margin: 0.25rem 0 0; }
.inline-form { display: flex; flex-wrap: wrap; gap: 0.75rem; align-items: flex-end; }
.inline-form .field { margin-bottom: 0; flex: 0 1 28rem; }
.panel + .hint { margin-top: 0.5rem; }
button, .button { display: inline-block; font: inherit; font-weight: 600; padding: 0.5rem 1rem; border-radius: 6px; border: 2px solid var(--accent);
  background: var(--accent); color: #fff; cursor: pointer; text-decoration: none; line-height: 1.5; }
button:hover, .button:hover { background: var(--accent-dark); border-color: var(--accent-dark); color: #fff; }
.button-secondary { background: #fff; color: var(--accent); }
.button-secondary:hover { background: var(--surface); color: var(--accent-dark); }
.button-danger { background: var(--danger); border-color: var(--danger); }
.button-danger:hover { background: var(--danger-dark); border-color: var(--danger-dark); }
.link-button { background: none; border: none; color: #fff; text-decoration: underline; padding: 0; font-weight: 400; }
.link-button:hover { background: none; color: #fff; }
.actions { display: flex; flex-wrap: wrap; gap: 0.75rem; align-items: center; margin-top: 1.25rem; }
.notice, .alert, .warning { border-left: 6px solid; padding: 0.75rem 1rem; margin: 1rem 0; border-radius: 4px; }
.notice { border-color: #137333; background: #e6f4ea; }
.alert { border-color: var(--danger); background: #fce8e6; }
.warning { border-color: #b06000; background: #fef7e0; }
.notice p, .alert p, .warning p { margin: 0.25rem 0; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; }
caption { text-align: left; font-weight: 600; padding-bottom: 0.5rem; }
th, td { text-align: left; padding: 0.625rem 0.75rem; border-bottom: 1px solid var(--line); vertical-align: top; }
thead th { background: var(--surface); font-size: 0.9375rem; }
td.actions-cell { white-space: nowrap; }
td.actions-cell a { margin-right: 0.75rem; }
.status { display: inline-block; padding: 0.125rem 0.5rem; border-radius: 999px; font-size: 0.875rem; font-weight: 600; }
.status-active { background: #e6f4ea; color: #0d652d; }
.status-revoked { background: #eceff1; color: #37474f; }
.hint-code { white-space: nowrap; }
.scope, .hint-code { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 0.875rem; }
.key-box { display: flex; flex-wrap: wrap; gap: 0.5rem; align-items: center; }
.key-box input { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; max-width: 42rem; flex: 1 1 30rem; }
.card-list { list-style: none; padding: 0; display: grid; gap: 1rem; }
.card-list ul { margin: 0.5rem 0 0; padding-left: 1.25rem; list-style: disc; }
.card-list h2 { margin: 0 0 0.25rem; }
`

/**
 * Progressive enhancement only: every page works without it. It reveals and
 * wires the copy button beside a new key, and says what happened in a live region.
 */
const script = `'use strict'
for (const button of document.querySelectorAll('button[data-copy-target]')) {
  const input = document.getElementById(button.getAttribute('data-copy-target'))
  const status = document.getElementById(button.getAttribute('data-copy-status'))
  if (!input || !status) continue
  button.hidden = false
  button.addEventListener('click', async () => {
    input.focus()
    input.select()
    try {
      await navigator.clipboard.writeText(input.value)
      status.textContent = 'Copied to the clipboard.'
    } catch {
      status.textContent = 'The key is selected: press Ctrl+C (or Command+C) to copy it.'
    }
  })
}
`

interface Asset {
  body: string
  type: string
  etag: string
}

function asset(body: string, type: string): Asset {
  return { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 16)}"` }
}

const assets: Readonly<Record<string, Asset>> = {
  'console.css': asset(stylesheet, 'text/css; charset=utf-8'),
  'console.js': asset(script, 'text/javascript; charset=utf-8'),
}

export async function assetRoutes(app: FastifyInstance): Promise<void> {
  for (const [name, file] of Object.entries(assets)) {
    app.get(`/assets/${name}`, async (request, reply) => {
      reply.header('cache-control', 'no-cache').header('etag', file.etag)
      if (request.headers['if-none-match'] === file.etag) return reply.code(304).send()
      return reply.type(file.type).send(file.body)
    })
  }
}
