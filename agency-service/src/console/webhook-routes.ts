/**
 * Agency settings → Webhooks, for the agency's owners and admins (access.ts):
 *
 *   GET  …/webhooks                                   the endpoints, how each stands, the registration form
 *   POST …/webhooks                                   register; the secret is shown on the answer page, once
 *   POST …/webhooks/:id/roll-secret                   a new secret, shown once
 *   POST …/webhooks/:id/enabled                       enabled=true|false
 *   POST …/webhooks/:id/delete                        delete, with its pending deliveries
 *   GET  …/webhooks/:id/deliveries                    the latest attempts
 *   POST …/webhooks/:id/deliveries/:deliveryId/redeliver
 *
 * The same store and the same URL rules as the API (WEBHOOK_ALLOW_PRIVATE_ADDRESSES
 * included); another agency's endpoint is not found.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Pool } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { uuidOrNotFound } from '@scoped/shared/validation'
import { urlProblem } from '../webhooks/address-policy.js'
import type { TargetPolicy } from '../webhooks/address-policy.js'
import { isWebhookEventType } from '../webhooks/event-types.js'
import { MAX_ENDPOINTS_PER_AGENCY, WebhookStore } from '../webhooks/webhook-store.js'
import { agencyKeyArea, requireWebhookManager } from './access.js'
import { sessionOf } from './authenticate.js'
import { FORM_BODY_LIMIT, formField } from './csrf.js'
import { sendPage } from './error-page.js'
import type { ConsolePaths } from './paths.js'
import { consoleRoutes } from './paths.js'
import type { WebhookFormState, WebhookNotice } from './webhook-views.js'
import { deliveriesPage, webhookNotices, webhookSecretPage, webhooksPage } from './webhook-views.js'

type TenantParams = { tenantId: string }
type EndpointParams = TenantParams & { id: string }

const base = consoleRoutes.agencyWebhooks
const DELIVERIES_SHOWN = 50

interface RouteContext {
  pool: Pool
  paths: ConsolePaths
  store: WebhookStore
  policy: TargetPolicy
}

function noticeOf(query: unknown): WebhookNotice | undefined {
  const value = typeof query === 'object' && query !== null ? (query as Record<string, unknown>)['notice'] : undefined
  return webhookNotices.find((known) => known === value)
}

/** The page's context for an owner or admin of the agency (403 for its members, 404 for everyone else). */
async function managed({ pool, paths }: RouteContext, request: FastifyRequest<{ Params: TenantParams }>) {
  const session = sessionOf(request)
  const area = await agencyKeyArea(pool, paths, session.userId, request.params.tenantId)
  return { paths, session, area, webhooksPath: requireWebhookManager(area) }
}

function endpointIdOf(request: FastifyRequest<{ Params: EndpointParams }>): string {
  return uuidOrNotFound(request.params.id, () => new ApiError('notFound', 'Webhook endpoint not found'))
}

/** The registration form as posted: the URL and the chosen events, or what is wrong with them. */
function readForm(request: FastifyRequest, policy: TargetPolicy): { url: string; events: string[]; problem?: string } {
  const url = (formField(request, 'url') ?? '').trim()
  const raw = (request.body as Record<string, unknown> | null)?.['events']
  const events = (Array.isArray(raw) ? raw : raw === undefined ? [] : [raw]).filter((value): value is string => typeof value === 'string')
  const urlIssue = url === '' ? 'Enter the endpoint’s URL' : urlProblem(url, policy)
  if (urlIssue !== undefined) return { url, events, problem: url === '' ? urlIssue : `The URL ${urlIssue}` }
  if (events.length === 0) return { url, events, problem: 'Choose at least one event' }
  if (!events.every(isWebhookEventType)) return { url, events, problem: 'Choose events from the list' }
  return { url, events: [...new Set(events)] }
}

export async function webhookConsoleRoutes(app: FastifyInstance, options: { pool: Pool; paths: ConsolePaths; policy: TargetPolicy }): Promise<void> {
  const context: RouteContext = { ...options, store: new WebhookStore(options.pool) }
  const { store } = context

  const listPage = async (request: FastifyRequest<{ Params: TenantParams }>, form: WebhookFormState, notice?: WebhookNotice): Promise<string> => {
    const page = await managed(context, request)
    const [endpoints, health] = await Promise.all([store.all(page.area.agency.id), store.health(page.area.agency.id)])
    return webhooksPage({ ...page, endpoints, health, form, notice })
  }

  app.get<{ Params: TenantParams }>(base, async (request, reply) => sendPage(reply, 200, await listPage(request, {}, noticeOf(request.query))))

  app.post<{ Params: TenantParams }>(base, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    const page = await managed(context, request)
    const form = readForm(request, context.policy)
    if (form.problem !== undefined) return sendPage(reply, 400, await listPage(request, { url: form.url, events: form.events, error: form.problem }))
    const created = await store.create(page.area.agency.id, form.url, form.events.filter(isWebhookEventType))
    if (created === undefined) {
      const error = `An agency has at most ${MAX_ENDPOINTS_PER_AGENCY} webhook endpoints: delete one first`
      return sendPage(reply, 409, await listPage(request, { url: form.url, events: form.events, error }))
    }
    request.log.info({ endpointId: created.id, agencyId: page.area.agency.id }, 'console: webhook endpoint registered')
    return sendPage(reply.header('cache-control', 'no-store'), 201, webhookSecretPage(page, created, false))
  })

  app.post<{ Params: EndpointParams }>(`${base}/:id/roll-secret`, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    const page = await managed(context, request)
    const rolled = await store.rollSecret(page.area.agency.id, endpointIdOf(request))
    if (rolled === undefined) throw new ApiError('notFound', 'Webhook endpoint not found')
    return sendPage(reply.header('cache-control', 'no-store'), 200, webhookSecretPage(page, rolled, true))
  })

  app.post<{ Params: EndpointParams }>(`${base}/:id/enabled`, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    const page = await managed(context, request)
    const enabled = formField(request, 'enabled')
    if (enabled !== 'true' && enabled !== 'false') throw new ApiError('badRequest', 'enabled must be true or false')
    const updated = await store.update(page.area.agency.id, endpointIdOf(request), { enabled: enabled === 'true' })
    if (updated === undefined) throw new ApiError('notFound', 'Webhook endpoint not found')
    return reply.redirect(`${page.webhooksPath}?notice=${updated.enabled ? 'enabled' : 'disabled'}`, 303)
  })

  app.post<{ Params: EndpointParams }>(`${base}/:id/delete`, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    const page = await managed(context, request)
    if (!(await store.delete(page.area.agency.id, endpointIdOf(request)))) throw new ApiError('notFound', 'Webhook endpoint not found')
    return reply.redirect(`${page.webhooksPath}?notice=deleted`, 303)
  })

  deliveryRoutes(app, context)
}

function deliveryRoutes(app: FastifyInstance, context: RouteContext): void {
  const { store } = context
  app.get<{ Params: EndpointParams }>(`${base}/:id/deliveries`, async (request, reply) => {
    const page = await managed(context, request)
    const endpoint = await store.find(page.area.agency.id, endpointIdOf(request))
    const deliveries = endpoint && (await store.deliveries(page.area.agency.id, endpoint.id, { limit: DELIVERIES_SHOWN }))
    if (endpoint === undefined || deliveries === undefined) throw new ApiError('notFound', 'Webhook endpoint not found')
    return sendPage(reply, 200, deliveriesPage(page, endpoint, deliveries.data, noticeOf(request.query)))
  })

  app.post<{ Params: EndpointParams & { deliveryId: string } }>(
    `${base}/:id/deliveries/:deliveryId/redeliver`,
    { bodyLimit: FORM_BODY_LIMIT },
    async (request, reply) => {
      const page = await managed(context, request)
      const endpointId = endpointIdOf(request)
      const deliveryId = uuidOrNotFound(request.params.deliveryId, () => new ApiError('notFound', 'Delivery not found'))
      if (!(await store.redeliver(page.area.agency.id, endpointId, deliveryId))) throw new ApiError('notFound', 'Delivery not found')
      return reply.redirect(`${page.webhooksPath}/${endpointId}/deliveries?notice=redelivered`, 303)
    },
  )
}
