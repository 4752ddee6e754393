/**
 * What every Webhooks page shares: who and where (the context), the
 * breadcrumbs, how an endpoint is named to a person, and the notices a change
 * leaves for the next page (shown once: notices.ts).
 */
import type { WebhookEndpoint } from '../webhooks/webhook-store.js'
import type { KeyArea } from './access.js'
import type { SafeHtml } from './html.js'
import { html } from './html.js'
import { crumbs } from './key-views.js'
import type { Crumb } from './layout.js'
import type { ConsolePaths } from './paths.js'
import type { ConsoleSession } from './sessions.js'

export interface WebhookPageContext {
  paths: ConsolePaths
  session: ConsoleSession
  area: KeyArea
  webhooksPath: string
  /** The clock of relative times ("5 min ago"). */
  now: Date
}

/** The trail to a webhooks page: Console › agency › Webhooks › (endpoint) › (page). */
export function webhookCrumbs(context: WebhookPageContext, ...after: Crumb[]): Crumb[] {
  return [...crumbs(context.paths, context.area, undefined, { label: 'Webhooks', href: context.webhooksPath }), ...after]
}

const LABEL_LENGTH = 80

/** An endpoint as a person names it: its URL, shortened when long (an agency may have two endpoints on one host). */
export function endpointLabel(endpoint: Pick<WebhookEndpoint, 'url'>): string {
  return endpoint.url.length <= LABEL_LENGTH ? endpoint.url : `${endpoint.url.slice(0, LABEL_LENGTH - 1)}…`
}

/** The notices of the Webhooks pages: a closed vocabulary, stored by the change and taken by the page it leads to. */
export const webhookNotices = ['updated', 'enabled', 'disabled', 'deleted', 'redelivered'] as const
export type WebhookNotice = (typeof webhookNotices)[number]

export function isWebhookNotice(value: unknown): value is WebhookNotice {
  return (webhookNotices as readonly unknown[]).includes(value)
}

/** What a notice says, naming the endpoint (or, after a redelivery, the event). */
function noticeText(notice: WebhookNotice, subject: string | null): string {
  const endpoint = subject === null ? 'The endpoint' : `Endpoint ${subject}`
  switch (notice) {
    case 'updated':
      return `${endpoint} was saved. Events from now on go to its URL, for the events chosen.`
    case 'enabled':
      return `${endpoint} was enabled: its pending deliveries resume.`
    case 'disabled':
      return `${endpoint} was disabled: no event is queued for it until it is enabled again.`
    case 'deleted':
      return `${endpoint} was deleted, with its pending deliveries.`
    case 'redelivered':
      return `${subject === null ? 'The event' : `The ${subject} event`} will be sent again in a moment, with the same webhook-id.`
  }
}

export function noticeBox(notice: { notice: WebhookNotice; subject: string | null } | undefined): SafeHtml | false {
  return notice !== undefined && html`<div class="notice" role="status"><p>${noticeText(notice.notice, notice.subject)}</p></div>`
}
