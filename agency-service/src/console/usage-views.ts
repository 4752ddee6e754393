/**
 * The Usage page of agency settings (its own keys and every sub-account's)
 * and of sub-account settings: requests over time by outcome, latency p50 and
 * p99 over time, the busiest keys, each sub-account (agency only) and the
 * request log, filtered by key, outcome and time range. Every chart has a
 * table beside it; every table stacks its cells on a narrow screen.
 */
import type { UsageOutcome } from '@scoped/shared/usage'
import { usageOutcomes } from '@scoped/shared/usage'
import type { RequestLogItem } from '../routes/request-log.js'
import type { UsagePoint } from '../usage/usage-report.js'
import type { KeyArea } from './access.js'
import type { SafeHtml } from './html.js'
import { html } from './html.js'
import { crumbs, formatTime, settingsTabs, tenantName } from './key-views.js'
import { page } from './layout.js'
import type { ConsolePaths } from './paths.js'
import type { ConsoleSession } from './sessions.js'
import { bucketLabel, latencyChart, requestsChart } from './usage-chart.js'

/** The time ranges offered, each with the granularity that gives it a readable number of bars. */
export const usageRanges = {
  '1h': { label: 'Last hour', ms: 3_600_000, granularity: 'minute' },
  '24h': { label: 'Last 24 hours', ms: 86_400_000, granularity: 'hour' },
  '7d': { label: 'Last 7 days', ms: 7 * 86_400_000, granularity: 'hour' },
  '30d': { label: 'Last 30 days', ms: 30 * 86_400_000, granularity: 'day' },
} as const
export type UsageRange = keyof typeof usageRanges

export const outcomeNames: Record<UsageOutcome, string> = {
  served: 'Served',
  revoked: 'Revoked key',
  expired: 'Expired key',
  'address-refused': 'Address refused',
  'scope-refused': 'Scope refused',
  'permission-refused': 'Permission refused',
  'rate-limited': 'Rate limited',
  'bad-request': 'Bad request',
  timeout: 'Timeout',
}

export interface UsageRow {
  id: string
  name: string
  requests: number
  href?: string
}

export interface UsagePageOptions {
  paths: ConsolePaths
  session: ConsoleSession
  area: KeyArea
  range: UsageRange
  keyId: string | undefined
  outcome: UsageOutcome | undefined
  points: readonly UsagePoint[]
  busiest: readonly UsageRow[]
  /** Each sub-account's requests, on an agency's page; null on a sub-account's. */
  subAccounts: readonly UsageRow[] | null
  log: readonly RequestLogItem[]
  keyNames: ReadonlyMap<string, string>
  olderHref: string | undefined
}

const cell = (label: string, content: SafeHtml | string | number): SafeHtml => html`<td data-label="${label}">${content}</td>`

function stackingTable(id: string, caption: string, header: readonly string[], rows: readonly SafeHtml[]): SafeHtml {
  return html`<div class="table-wrap" role="region" aria-labelledby="${id}" tabindex="0">
<table class="stacking">
  <caption id="${id}">${caption}</caption>
  <thead><tr>${header.map((name) => html`<th scope="col">${name}</th>`)}</tr></thead>
  <tbody>${rows}</tbody>
</table>
</div>`
}

function legend(outcomes: readonly UsageOutcome[]): SafeHtml {
  return html`<ul class="chart-legend">${outcomes.map((o) => html`<li><span class="swatch chart-outcome-${o}"></span>${outcomeNames[o]}</li>`)}</ul>`
}

function requestsSection(points: readonly UsagePoint[]): SafeHtml {
  // Only the outcomes that occurred get a column (served always): nine mostly empty columns would hide the figures.
  const shown = usageOutcomes.filter((o) => o === 'served' || points.some((p) => p.outcomes[o] > 0))
  const rows = points.map(
    (p) => html`<tr>${cell('Time (UTC)', bucketLabel(p.at))}${cell('Requests', p.requests)}${shown.map((o) => cell(outcomeNames[o], p.outcomes[o]))}</tr>`,
  )
  return html`<section class="usage-section" aria-labelledby="requests-heading">
<h2 id="requests-heading">Requests over time, by outcome</h2>
<div class="chart-figure">${requestsChart(points, 'requests-heading')}${legend(shown)}</div>
${stackingTable('requests-caption', 'Requests per interval, by outcome', ['Time (UTC)', 'Requests', ...shown.map((o) => outcomeNames[o])], rows)}
</section>`
}

const ms = (value: number | null): string => (value === null ? '—' : `${value} ms`)

function latencySection(points: readonly UsagePoint[]): SafeHtml {
  const rows = points.map(
    (p) =>
      html`<tr>${cell('Time (UTC)', bucketLabel(p.at))}${cell('Requests', p.requests)}${cell('p50', ms(p.latencyMs.p50))}${cell('p99', ms(p.latencyMs.p99))}</tr>`,
  )
  return html`<section class="usage-section" aria-labelledby="latency-heading">
<h2 id="latency-heading">Latency over time, p50 and p99</h2>
<div class="chart-figure">${latencyChart(points, 'latency-heading')}<ul class="chart-legend"><li><span class="swatch chart-line-p50"></span>p50 (half the answers were faster)</li><li><span class="swatch chart-line-p99"></span>p99 (all but one in a hundred were faster)</li></ul></div>
${stackingTable('latency-caption', 'Latency per interval (the upper bound of the histogram bucket)', ['Time (UTC)', 'Requests', 'p50', 'p99'], rows)}
</section>`
}

function rankedTable(id: string, caption: string, what: string, rows: readonly UsageRow[]): SafeHtml {
  if (rows.length === 0) return html`<p>No requests in this range.</p>`
  return stackingTable(
    id,
    caption,
    [what, 'Id', 'Requests'],
    rows.map(
      (row) =>
        html`<tr>${cell(what, row.href === undefined ? row.name : html`<a href="${row.href}">${row.name}</a>`)}${cell('Id', html`<code>${row.id}</code>`)}${cell('Requests', row.requests)}</tr>`,
    ),
  )
}

function logSection(options: UsagePageOptions): SafeHtml {
  const rows = options.log.map(
    (item) =>
      html`<tr>${cell('When', formatTime(item.at, '—'))}${cell('Key', html`${options.keyNames.get(item.keyId) ?? ''} <code>${item.keyId}</code>`)}${cell(
        'Request',
        html`<code>${item.method} ${item.path}</code>`,
      )}${cell('Status', item.status)}${cell('Outcome', outcomeNames[item.outcome as UsageOutcome] ?? item.outcome)}${cell('Duration', `${item.durationMs} ms`)}${cell(
        'Client address',
        item.clientAddress === null ? '—' : html`<code>${item.clientAddress}</code>`,
      )}${cell('Request id', html`<code>${item.requestId}</code>`)}</tr>`,
  )
  return html`<section class="usage-section" aria-labelledby="log-heading">
<h2 id="log-heading">Request log</h2>
<p class="hint">Refused requests and 5xx answers (every request when the operator set <code>REQUEST_LOG=all</code>), newest first. Never a key, a query string or a body.</p>
${
  rows.length === 0
    ? html`<p>No logged requests in this range.</p>`
    : stackingTable(
        'log-caption',
        'Logged requests, newest first',
        ['When', 'Key', 'Request', 'Status', 'Outcome', 'Duration', 'Client address', 'Request id'],
        rows,
      )
}
${options.olderHref !== undefined && html`<p class="actions"><a class="button button-secondary" href="${options.olderHref}">Older requests</a></p>`}
</section>`
}

function filterForm(options: UsagePageOptions): SafeHtml {
  const { area, range, keyId, outcome, busiest, keyNames } = options
  const keys = new Map(busiest.map((row) => [row.id, row.name]))
  if (keyId !== undefined && !keys.has(keyId)) keys.set(keyId, keyNames.get(keyId) ?? keyId)
  const selected = (here: boolean): string => (here ? ' selected' : '')
  return html`<form method="get" action="${area.usagePath}" class="inline-form filter-form">
  <div class="field">
    <label for="usage-range">Time</label>
    <select id="usage-range" name="range">${Object.entries(usageRanges).map(
      ([value, r]) => html`<option value="${value}"${selected(value === range)}>${r.label}</option>`,
    )}</select>
  </div>
  <div class="field">
    <label for="usage-key">Key</label>
    <select id="usage-key" name="key"><option value="">All keys</option>${[...keys].map(
      ([id, name]) => html`<option value="${id}"${selected(id === keyId)}>${name} (${id.slice(0, 8)})</option>`,
    )}</select>
  </div>
  <div class="field">
    <label for="usage-outcome">Outcome (request log)</label>
    <select id="usage-outcome" name="outcome"><option value="">All outcomes</option>${usageOutcomes.map(
      (o) => html`<option value="${o}"${selected(o === outcome)}>${outcomeNames[o]}</option>`,
    )}</select>
  </div>
  <button type="submit" class="button-secondary">Show</button>
</form>`
}

export function usagePage(options: UsagePageOptions): string {
  const { paths, session, area, points } = options
  const whose = area.subAccount === null ? html`${tenantName(area)}: its own keys and every sub-account's` : tenantName(area)
  const total = points.reduce((sum, p) => sum + p.requests, 0)
  return page({
    paths,
    title: `Usage · ${area.subAccount?.name ?? area.agency.name}`,
    session,
    crumbs: crumbs(paths, area, undefined, { label: 'Usage', href: area.usagePath }),
    body: html`<h1>Usage</h1>
<p class="lede">What the keys of ${whose} did through the gateway: every answer counted, shown within 10 seconds. <strong>${total.toLocaleString('en-US')}</strong> requests in this range.</p>
${settingsTabs(area, 'usage')}
${filterForm(options)}
${requestsSection(points)}
${latencySection(points)}
<section class="usage-section" aria-labelledby="busiest-heading">
<h2 id="busiest-heading">Busiest keys</h2>
${rankedTable('busiest-caption', 'Keys with the most requests in this range', 'Key', options.busiest)}
</section>
${
  options.subAccounts !== null &&
  html`<section class="usage-section" aria-labelledby="sub-accounts-heading">
<h2 id="sub-accounts-heading">By sub-account</h2>
${rankedTable('sub-accounts-caption', 'Requests of each sub-account’s keys in this range', 'Sub-account', options.subAccounts)}
</section>`
}
${logSection(options)}`,
  })
}
