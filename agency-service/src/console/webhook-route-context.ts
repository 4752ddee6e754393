/**
 * What every Webhooks route shares: the page context of an owner or admin of
 * the agency (403 for its members, 404 for everyone else), the endpoint a
 * route names (or a page that says it is gone), and where a change sends the
 * browser with a notice naming the endpoint, shown once.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Pool } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { uuidOrNotFound } from '@scoped/shared/validation'
import type { TargetPolicy } from '../webhooks/address-policy.js'
import type { WebhookEndpoint, WebhookEndpointWithSecret, WebhookStore } from '../webhooks/webhook-store.js'
import type { KeyArea } from './access.js'
import { agencyKeyArea, requireWebhookManager } from './access.js'
import { sessionOf } from './authenticate.js'
import { StalePageError } from './error-page.js'
import type { FormOutcome } from './form-once.js'
import { storeNotice, takeNotice } from './notices.js'
import type { ConsolePaths } from './paths.js'
import { consoleRoutes } from './paths.js'
import type { WebhookNotice, WebhookPageContext } from './webhook-page.js'
import { isWebhookNotice } from './webhook-page.js'

export type TenantParams = { tenantId: string }
export type EndpointParams = TenantParams & { id: string }

export const WEBHOOKS_ROUTE = consoleRoutes.agencyWebhooks

export interface WebhookRoutesOptions {
  pool: Pool
  paths: ConsolePaths
  policy: TargetPolicy
  now: () => Date
}

export interface WebhookRouteContext extends WebhookRoutesOptions {
  app: FastifyInstance
  store: WebhookStore
}

/** The agency area of the request, for any of its users (the page for members says why it is not theirs). */
export async function areaOf(context: WebhookRouteContext, request: FastifyRequest<{ Params: TenantParams }>): Promise<KeyArea> {
  return agencyKeyArea(context.pool, context.paths, sessionOf(request).userId, request.params.tenantId)
}

export function pageContext(context: WebhookRouteContext, request: FastifyRequest, area: KeyArea, webhooksPath: string): WebhookPageContext {
  return { paths: context.paths, session: sessionOf(request), area, webhooksPath, now: context.now() }
}

/** The page context of an owner or admin of the agency: 403 for its members, 404 for everyone else. */
export async function managed(context: WebhookRouteContext, request: FastifyRequest<{ Params: TenantParams }>): Promise<WebhookPageContext> {
  const area = await areaOf(context, request)
  return pageContext(context, request, area, requireWebhookManager(area))
}

/** An endpoint that is not (or no longer) the agency's: a page that says so and leads back to the list. */
export function staleEndpoint(page: WebhookPageContext): StalePageError {
  return new StalePageError('This webhook endpoint no longer exists: it was deleted, or never belonged here. Its page is out of date.', {
    href: page.webhooksPath,
    label: `Back to the webhooks of ${page.area.agency.name}`,
  })
}

export function endpointIdOf(params: EndpointParams): string {
  return uuidOrNotFound(params.id, () => new ApiError('notFound', 'Webhook endpoint not found'))
}

export async function endpointOf(context: WebhookRouteContext, page: WebhookPageContext, params: EndpointParams): Promise<WebhookEndpoint> {
  const endpoint = await context.store.find(page.area.agency.id, endpointIdOf(params))
  if (endpoint === undefined) throw staleEndpoint(page)
  return endpoint
}

/**
 * Stores the notice for the page a change leads to (`to`) and answers the
 * redirect to it. Called within submitOnce's work, so a repeated submit gets
 * the same redirect and no second notice.
 */
export async function afterChange(
  context: WebhookRouteContext,
  request: FastifyRequest,
  to: string,
  notice: WebhookNotice,
  subject: string | null,
): Promise<FormOutcome> {
  await storeNotice(context.pool, sessionOf(request).tokenHash, to, { notice, subject }, context.now())
  return { kind: 'redirect', location: to }
}

/** The notice stored for this session and page, once. */
export async function takeWebhookNotice(
  context: WebhookRouteContext,
  request: FastifyRequest,
  page: string,
): Promise<{ notice: WebhookNotice; subject: string | null } | undefined> {
  const stored = await takeNotice(context.pool, sessionOf(request).tokenHash, page)
  return stored !== undefined && isWebhookNotice(stored.notice) ? { notice: stored.notice, subject: stored.subject } : undefined
}

/** The outcome of a form that made a secret: the redirect to its one-time display (form-once.ts seals the secret for it). */
export function revealSecret(page: WebhookPageContext, endpoint: WebhookEndpointWithSecret, rolled: boolean): FormOutcome {
  const location = `${page.webhooksPath}/${endpoint.id}/secret${rolled ? '?rolled=1' : ''}`
  return { kind: 'redirect', location, reveal: { kind: 'webhook-secret', id: endpoint.id, secret: endpoint.secret } }
}
