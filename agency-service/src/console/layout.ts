/** The page shell every console page shares: head, header with the signed-in user and sign-out, breadcrumbs, main. */
import type { ConsoleSession } from './sessions.js'
import { CSRF_FIELD } from './csrf.js'
import type { HtmlValue, SafeHtml } from './html.js'
import { html } from './html.js'
import type { ConsolePaths } from './paths.js'

export interface Crumb {
  label: string
  href?: string
}

export interface PageOptions {
  paths: ConsolePaths
  title: string
  session?: ConsoleSession | undefined
  crumbs?: readonly Crumb[]
  body: HtmlValue
}

export function csrfInput(token: string): SafeHtml {
  return html`<input type="hidden" name="${CSRF_FIELD}" value="${token}">`
}

function header(paths: ConsolePaths, session: ConsoleSession | undefined): SafeHtml {
  return html`<header class="site-header">
  <a class="brand" href="${paths.home}">API key console</a>
  ${
    session &&
    html`<div class="account">
    <span>Signed in as <strong>${session.email}</strong></span>
    <a href="${paths.accountPassword}">Your password</a>
    <form method="post" action="${paths.signOut}">${csrfInput(session.csrfToken)}<button type="submit" class="link-button">Sign out</button></form>
  </div>`
  }
</header>`
}

function breadcrumbs(crumbs: readonly Crumb[] | undefined): SafeHtml | undefined {
  if (crumbs === undefined || crumbs.length === 0) return undefined
  return html`<nav class="breadcrumbs" aria-label="Breadcrumb"><ol>${crumbs.map((crumb, index) =>
    index === crumbs.length - 1
      ? html`<li aria-current="page">${crumb.label}</li>`
      : crumb.href === undefined
        ? html`<li>${crumb.label}</li>`
        : html`<li><a href="${crumb.href}">${crumb.label}</a></li>`,
  )}</ol></nav>`
}

export function page(options: PageOptions): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${options.title} · API key console</title>
<link rel="stylesheet" href="${options.paths.asset('console.css')}">
<script src="${options.paths.asset('console.js')}" defer></script>
</head>
<body>
<a class="skip-link" href="#main">Skip to main content</a>
${header(options.paths, options.session)}
<main id="main" tabindex="-1">
${breadcrumbs(options.crumbs)}
${options.body}
</main>
</body>
</html>
`.toString()
}
